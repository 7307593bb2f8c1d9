"""Hardware TOML: presets load; untrusted files are validated key by key with clear errors."""
import pytest

from nac_engine.sim.config import HardwareConfigError, build_hardware, load_hardware, parse_value, preset_names

PRESETS = ["nac-core-ref", "edge-32x32", "server-128x128", "scalesim-32x32-os", "scalesim-32x32-ws",
           "scalesim-32x32-is"]


def test_all_presets_exist_and_load():
    assert set(PRESETS) <= set(preset_names())
    for name in PRESETS:
        hw = load_hardware(name)
        assert hw.name == name
        assert hw.source.endswith(f"{name}.toml")


def test_preset_values():
    assert load_hardware("scalesim-32x32-ws").array.dataflow == "ws"
    assert load_hardware("scalesim-32x32-is").array.timing == "scalesim"
    ref = load_hardware("nac-core-ref")
    assert ref.core.model == "refcore"
    assert ref.refcore.slots_per_tick == 256 and ref.refcore.lanes == 8 and ref.sram.bytes == 32768
    assert load_hardware("server-128x128").array.rows == 128


def _err(doc):
    with pytest.raises(HardwareConfigError) as e:
        build_hardware(doc)
    return str(e.value)


@pytest.mark.parametrize("doc,needle", [
    ({"array": {"rows": -3}}, "array.rows"),
    ({"array": {"rows": 0}}, "array.rows"),
    ({"array": {"rows": 1 << 20}}, "array.rows"),
    ({"array": {"rows": 2.5}}, "array.rows"),
    ({"array": {"rows": True}}, "array.rows"),
    ({"array": {"rows": "32"}}, "array.rows"),
    ({"array": {"rowz": 32}}, "array.rowz: unknown key"),
    ({"array": {"dataflow": "rs"}}, "array.dataflow"),
    ({"array": {"timing": 3}}, "array.timing"),
    ({"arrya": {"rows": 3}}, "arrya: unknown table"),
    ({"clock_hz": 0}, "clock_hz"),
    ({"clock_hz": float("nan")}, "clock_hz"),
    ({"clock_hz": float("inf")}, "clock_hz"),
    ({"dram": {"bytes_per_cycle": -1.0}}, "dram.bytes_per_cycle"),
    ({"dram": {"latency": -1}}, "dram.latency"),
    ({"dma": {"engines": 0}}, "dma.engines"),
    ({"sram": {"bytes": 0}}, "sram.bytes"),
    ({"sram": 5}, "sram"),
    ({"name": 5}, "name"),
    ({"dtype_bytes": {"float32": 0}}, "dtype_bytes.float32"),
    ({"dtype_bytes": {"float32": "4"}}, "dtype_bytes.float32"),
    ({"dtype_bytes": 4}, "dtype_bytes"),
    ({"vector": {"cycles_per_vector": {"gemm": 1}}}, "vector.cycles_per_vector.gemm"),
    ({"core": {"model": "cycle"}}, "core.model"),
    ({"refcore": {"klat": "fast"}}, "refcore.klat"),
    ({"refcore": {"klat": -1}}, "refcore.klat"),
    ({"refcore": {"latency": {"preload": "slow"}}}, "refcore.latency.preload"),
    ({"refcore": {"latency": {"prefetch": 1}}}, "refcore.latency.prefetch"),
    ({"refcore": {"memory_semantics": "eager"}}, "refcore.memory_semantics"),
    ({"ops": {"mylib::f": "gemm"}}, "ops.mylib::f: expected cycles or one of elementwise"),
    ({"ops": {"mylib::f": -1}}, "ops.mylib::f: expected cycles"),
    ({"ops": {"mylib::f": True}}, "ops.mylib::f"),
    ({"ops": 3}, "ops: expected a table"),
    ({"ops": {f"o{i}": 1 for i in range(257)}}, "ops: at most 256 entries"),
])
def test_bad_values_name_the_key(doc, needle):
    assert needle in _err(doc)


def test_defaults_fill_what_a_file_omits():
    hw = build_hardware({"array": {"rows": 16}})
    assert hw.array.rows == 16 and hw.array.cols == 32
    assert hw.element_bytes("float32") == 4 and hw.element_bytes("int8") == 1
    assert hw.refcore.latency["preload"] == "dma"


def test_toml_files(tmp_path):
    good = tmp_path / "hw.toml"
    good.write_text('name = "mine"\n[array]\nrows = 8\ncols = 4\ndataflow = "ws"\n[dtype_bytes]\nfloat32 = 2\n')
    hw = load_hardware(str(good))
    assert (hw.name, hw.array.rows, hw.array.cols, hw.element_bytes("float32")) == ("mine", 8, 4, 2)
    bad = tmp_path / "bad.toml"
    bad.write_text("[array\nrows = 8\n")
    with pytest.raises(HardwareConfigError, match="not valid TOML"):
        load_hardware(str(bad))
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[array]\nrows = -8\n")
    with pytest.raises(HardwareConfigError, match=r"wrong.toml: array.rows"):
        load_hardware(str(wrong))
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"#" * ((1 << 20) + 1))
    with pytest.raises(HardwareConfigError, match="at most"):
        load_hardware(str(huge))
    with pytest.raises(HardwareConfigError, match="no such hardware file"):
        load_hardware(str(tmp_path / "missing.toml"))
    with pytest.raises(HardwareConfigError, match="unknown hardware preset"):
        load_hardware("no-such-preset")


def test_overrides_are_validated_like_the_file():
    hw = load_hardware("edge-32x32", {"array.rows": 64, "dram.bytes_per_cycle": 8})
    assert hw.array.rows == 64 and hw.dram.bytes_per_cycle == 8.0
    assert hw.array.cols == 32          # the rest of the preset is kept
    with pytest.raises(HardwareConfigError, match="array.rows"):
        load_hardware("edge-32x32", {"array.rows": 0})
    with pytest.raises(HardwareConfigError, match="array.bogus"):
        load_hardware("edge-32x32", {"array.bogus": 1})
    assert hw.with_overrides({"sram.bytes": 4096}).sram.bytes == 4096


def test_parse_value():
    assert parse_value("32") == 32 and parse_value("0x10") == 16 and parse_value("1.5") == 1.5
    assert parse_value("true") is True and parse_value("ws") == "ws"


@pytest.mark.parametrize("text", [
    "a = " + "[" * 100_000 + "]" * 100_000 + "\n",             # the review's deep.toml
    "a = " + "{b = " * 50_000 + "1" + "}" * 50_000 + "\n",      # inline tables
], ids=["arrays", "inline_tables"])
def test_deeply_nested_toml_is_a_config_error(tmp_path, text):
    path = tmp_path / "deep.toml"
    path.write_text(text)
    with pytest.raises(HardwareConfigError) as e:
        load_hardware(str(path))
    msg = str(e.value)
    assert "deep.toml" in msg and "nested" in msg and "\n" not in msg


def test_deeply_nested_tables_are_a_config_error():
    doc: dict = {"x": 1}
    for _ in range(100_000):
        doc = {"refcore": doc}
    with pytest.raises(HardwareConfigError, match="nested"):
        load_hardware(doc)
    with pytest.raises(HardwareConfigError, match="nested"):
        build_hardware(doc)
    with pytest.raises(HardwareConfigError, match="nested"):
        load_hardware("edge-32x32", {"array.rows": doc})


def test_deep_toml_from_the_cli(tmp_path, capsys):
    from nac_engine.cli import main
    from tests.resources_path import DEMO
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["sim", str(DEMO), "--input", "x=2x8", "--hw", str(path)]) == 2
    err = capsys.readouterr().err
    assert "deep.toml" in err and err.count("\n") == 1 and "Traceback" not in err
