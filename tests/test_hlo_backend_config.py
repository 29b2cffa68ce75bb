"""Backend configs in both printed forms: JSON and MLIR attribute dictionaries."""

from __future__ import annotations

import pytest

from profan.hlo import parse_file, parse_instruction
from profan.hlo.mlir_attributes import decode_attribute_dict
from profan.hlo.views import backend_config, trip_count
from tests.conftest import FIXTURES_DIR, gpu_fixtures


def test_synthetic_te_attention_config_decodes_to_numbers() -> None:
    # The form TransformerEngine's typed-FFI custom calls print (values from a TE call).
    line = (
        "%ca = (bf16[2,2048,16,128]{3,2,1,0}, f32[2,16,2048,1]{3,2,1,0}) "
        "custom-call(bf16[2,2048,16,128]{3,2,1,0} %q, bf16[2,2048,16,128]{3,2,1,0} %k, "
        'bf16[2,2048,16,128]{3,2,1,0} %v), custom_call_target="te_fused_attn_forward_ffi", '
        "api_version=API_VERSION_TYPED_FFI, backend_config={attn_heads = 16 : i64, "
        "input_batch = 2 : i64, q_max_seqlen = 2048 : i64, kv_max_seqlen = 2048 : i64, "
        "qk_head_dim = 128 : i64, v_head_dim = 128 : i64, mask_type = 2 : i64, "
        "scaling_factor = 0.0883883461 : f32, is_training = true, deterministic = false}"
    )
    config = backend_config(parse_instruction(line))
    assert config is not None
    assert config["attn_heads"] == 16 and config["q_max_seqlen"] == 2048
    assert config["is_training"] is True and config["deterministic"] is False
    assert abs(config["scaling_factor"] - 0.0883883461) < 1e-12


def test_synthetic_attribute_forms() -> None:
    decoded = decode_attribute_dict(
        r'{name = "a\22b\5Cc", dims = [1, 2 : i32], nested = {x = -3 : i64}, flag, '
        r"e = 1.5e3 : f64, sem = #tpu.dimension_semantics<parallel>, h = 0x10 : i32}"
    )
    assert decoded == {
        "name": 'a"b\\c',
        "dims": [1, 2],
        "nested": {"x": -3},
        "flag": True,
        "e": 1500.0,
        "sem": "#tpu.dimension_semantics<parallel>",
        "h": 16,
    }
    assert decode_attribute_dict("not a dict") is None
    assert decode_attribute_dict("{a = }") is None


@pytest.mark.parametrize("name", gpu_fixtures("gpu_kernels"))
def test_pallas_triton_call_config_from_a_real_gpu_dump(name: str) -> None:
    hlo_dir = FIXTURES_DIR / name / "hlo"
    dump = next(hlo_dir.glob("*jit_pallas_matmul.*after_optimizations.txt"))
    module = parse_file(str(dump))
    call = next(i for i in module.instructions() if i.opcode == "custom-call")
    config = backend_config(call)
    assert config is not None
    # 2048x2048 output in 128x128 blocks: a 16 x 16 grid, as the program asked.
    assert (config["grid_x"], config["grid_y"], config["grid_z"]) == (16, 16, 1)
    assert config["name"] == "pallas_matmul"


def test_json_backend_config_and_trip_count() -> None:
    line = (
        "%w = (s32[], f32[4]) while((s32[], f32[4]) %t), condition=%c, body=%b, "
        'backend_config={"known_trip_count":{"n":"12"}}'
    )
    instruction = parse_instruction(line)
    assert backend_config(instruction) == {"known_trip_count": {"n": "12"}}
    assert trip_count(instruction) == 12
    quoted = line.replace(
        'backend_config={"known_trip_count":{"n":"12"}}',
        r'backend_config="{\"known_trip_count\":{\"n\":\"7\"}}"',
    )
    assert trip_count(parse_instruction(quoted)) == 7
    assert trip_count(parse_instruction(line.split(", backend_config")[0])) is None
