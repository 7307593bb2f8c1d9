from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "resources" / "models" / "demo_mlp.nac"
