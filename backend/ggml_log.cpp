#include "ggml_log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ggml.h"

namespace dg {

namespace {

int g_threshold = GGML_LOG_LEVEL_WARN;
int g_last = GGML_LOG_LEVEL_NONE;  // the level a CONT message continues

int threshold_from_env() {
    const char* v = std::getenv("DYNGRAPH_GGML_LOG");
    if (v == nullptr) return GGML_LOG_LEVEL_WARN;
    if (!std::strcmp(v, "debug")) return GGML_LOG_LEVEL_DEBUG;
    if (!std::strcmp(v, "info")) return GGML_LOG_LEVEL_INFO;
    if (!std::strcmp(v, "error")) return GGML_LOG_LEVEL_ERROR;
    if (!std::strcmp(v, "none")) return GGML_LOG_LEVEL_CONT + 1;
    return GGML_LOG_LEVEL_WARN;
}

void log_to_stderr(ggml_log_level level, const char* text, void*) {
    const int l = level == GGML_LOG_LEVEL_CONT ? g_last : int(level);
    g_last = l;
    if (l >= g_threshold && l != GGML_LOG_LEVEL_NONE) std::fputs(text, stderr);
}

}  // namespace

void install_ggml_log() {
    g_threshold = threshold_from_env();
    ggml_log_set(log_to_stderr, nullptr);
}

}  // namespace dg
