"""oneDNN Graph interop: graphs in oneDNN's JSON (the format of
``ONEDNN_GRAPH_DUMP=graph`` and of benchdnn's graph driver), in and out.

:func:`from_json` (a finalized ``dg.Graph`` from a file) and :func:`to_json`
(a graph to a file) are the entry points (the core ``Graph`` does not know
this front end: it stands below it);
:func:`import_graph` also returns what the runner needs (graph inputs and
outputs in the file's order). The modules:

- :mod:`.document`: the file read and checked as untrusted input;
- :mod:`.options`, :mod:`.rewrite`: benchdnn's rewrites (``--in-shapes``, ``--dt``,
  ``--op-attrs``, ``--op-kind``, ``--mb``, ``--tensor-property``) and dynamic dims;
- :mod:`.opmap`: oneDNN's op kinds and attributes, and how they map;
- :mod:`.reader` / :mod:`.writer`: JSON to graph and back;
- :mod:`.source`: an imported graph's file ops, beside the dyngraph ops made
  of them: ``to_json`` writes the file's ops back where those are unchanged;
- :mod:`.fill`, :mod:`.compare`, :mod:`.runner`: running a case against the
  numpy reference (:mod:`dyngraph.reference`), as ``dyngraph run`` does.
"""

from .reader import Imported, from_json, import_graph, make_overrides
from .writer import to_document, to_json

__all__ = ["Imported", "from_json", "import_graph", "make_overrides", "to_document", "to_json"]
