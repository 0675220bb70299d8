"""The version of gpudsl (a leaf module: code generation stamps it into CUDA C)."""
__version__ = "0.1.0"
