"""`python -m driftline ...`: the CLI where the `driftline` script is not on the PATH (e.g. packages unpacked
with `pip install --target`, as on the GPU benchmark machine)."""
from driftline.cli import main

# Guarded: a child started with multiprocessing's spawn re-imports this module as __mp_main__.
if __name__ == "__main__":
    main()
