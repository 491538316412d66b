// ggml's log messages: by default ggml prints every level to stderr, debug
// included (one line per repacked weight). dyngraph keeps warnings and errors;
// DYNGRAPH_GGML_LOG=debug|info|warn|error|none chooses another threshold.
#pragma once

namespace dg {

void install_ggml_log();

}  // namespace dg
