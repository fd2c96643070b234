"""Generates the demo's tiny ONNX model, `www/model/style.onnx`, and its weights as JSON.

The model maps a normalized NHWC image to a restyled one, a high-contrast sepia print:

    styled = Sigmoid(MatMul(image, W) + b)        image: float32[1, 64, 64, 3]

Every column of W is the same: it undoes the ImageNet normalization and takes the luminance
(Rec. 601 weights), times a contrast gain K; b centres the S-curve at mid-grey and tints the
three outputs (red up, blue down). Blue sky and orange sunset both turn into browns: a visitor
sees the colours go. The weights are also written
to `style.json`, so that the end-to-end test computes the CPU reference from the same numbers.
Run once, from the repository root: `.venv/bin/python www/model/make_model.py`; the output is
committed, and `--check` verifies that the committed files are what this script produces.
"""

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
SIZE = 64

# The demo's normalization (www/src/app.js): x = (pixel / 255 - MEAN) / STD.
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])
LUMA = np.array([0.299, 0.587, 0.114])
K = 6.0  # contrast
TINT = np.array([0.9, 0.15, -0.8])  # sepia: red up, blue down

# styled_j = sigmoid(K * (luma(pixel) - 0.5) + TINT_j), with pixel = x * STD + MEAN.
W = np.repeat((K * LUMA * STD)[:, None], 3, axis=1).astype(np.float32)
B = (K * (LUMA @ MEAN - 0.5) + TINT).astype(np.float32)


def build() -> onnx.ModelProto:
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, SIZE, SIZE, 3])
    styled = helper.make_tensor_value_info("styled", TensorProto.FLOAT, [1, SIZE, SIZE, 3])
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["image", "W"], ["mixed"], name="mix"),
            helper.make_node("Add", ["mixed", "B"], ["shifted"], name="shift"),
            helper.make_node("Sigmoid", ["shifted"], ["styled"], name="squash"),
        ],
        "dlport_style",
        [image],
        [styled],
        initializer=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")],
    )
    model = helper.make_model(
        graph,
        producer_name="dlport www/model/make_model.py",
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def weights_json() -> str:
    return json.dumps(
        {"size": SIZE, "W": W.tolist(), "b": B.tolist(), "input": "image", "output": "styled"},
        indent=2,
    ) + "\n"


def main() -> int:
    model = build().SerializeToString(deterministic=True)
    text = weights_json()
    if "--check" in sys.argv:
        same = (HERE / "style.onnx").read_bytes() == model and (
            HERE / "style.json"
        ).read_text() == text
        print("www/model: committed model matches make_model.py" if same else "www/model: STALE")
        return 0 if same else 1
    (HERE / "style.onnx").write_bytes(model)
    (HERE / "style.json").write_text(text)
    print(f"wrote style.onnx ({len(model)} bytes) and style.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
