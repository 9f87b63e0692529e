"""Loads a script of scripts/ (hyphenated names, not importable) as a module for the Python tests,
with scripts/ on sys.path so that its own imports (valset.py) resolve."""
import importlib.util
import os
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")


def load_script(file_name):
    """(path of scripts/FILE_NAME, the module it defines)."""
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)
    path = os.path.join(SCRIPTS, file_name)
    spec = importlib.util.spec_from_file_location(os.path.splitext(file_name)[0].replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module
