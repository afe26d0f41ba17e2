"""memunet_torch, which lives in tools/pytorch/, for callers that still put
tools/ itself on sys.path (rundir/init_torch_test.go's TestInitFromPyTorch):
remove this file once they name tools/pytorch."""

import importlib.util as _util
import os as _os

_path = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "pytorch", "memunet_torch.py")
_spec = _util.spec_from_file_location("_memunet_torch", _path)
_module = _util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
globals().update({k: v for k, v in vars(_module).items() if not k.startswith("__")})
