from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "nac_studio" / "demos" / "demo_mlp.nac"
