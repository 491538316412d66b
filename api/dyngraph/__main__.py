"""``python -m dyngraph``: the ``dyngraph`` command, and where the C API lies:

    python -m dyngraph --cmake-dir       # for find_package(dyngraph): -Ddyngraph_DIR=...
    python -m dyngraph --includes        # -I<dir>
    python -m dyngraph --libs            # -L<dir> -Wl,-rpath,<dir> -ldyngraph
    python -m dyngraph --pkgconfig-dir   # for PKG_CONFIG_PATH
"""

import sys


def _paths(argv) -> int:
    import dyngraph

    lib = dyngraph.get_library_dir()
    out = {
        "--cmake-dir": dyngraph.get_cmake_dir(),
        "--includes": f"-I{dyngraph.get_include()}",
        "--libs": f"-L{lib} -Wl,-rpath,{lib} -ldyngraph",
        "--pkgconfig-dir": dyngraph.get_pkgconfig_dir(),
        "--library-dir": lib,
    }
    print(" ".join(out[a] for a in argv))
    return 0


PATH_FLAGS = ("--cmake-dir", "--includes", "--libs", "--pkgconfig-dir", "--library-dir")

if __name__ == "__main__":
    args = sys.argv[1:]
    if args and all(a in PATH_FLAGS for a in args):
        sys.exit(_paths(args))
    from .cli import main

    sys.exit(main())
