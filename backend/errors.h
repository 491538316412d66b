// Typed errors. Each maps to the Python class of the same name in dyngraph.errors.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace dg {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct ShapeError : Error {
    using Error::Error;
};
struct DTypeError : Error {
    using Error::Error;
};
struct IRError : Error {
    using Error::Error;
};
struct CompileError : Error {
    using Error::Error;
};
struct ExecutionError : Error {
    using Error::Error;
};

template <class... Parts>
std::string cat(Parts&&... parts) {
    std::ostringstream os;
    (os << ... << std::forward<Parts>(parts));
    return os.str();
}

template <class E, class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
    throw E(cat(std::forward<Parts>(parts)...));
}

}  // namespace dg
