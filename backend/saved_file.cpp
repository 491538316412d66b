#include "saved_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "errors.h"

namespace dg::saved {

namespace {

struct Table {
    uint32_t t[8][256];
    Table() {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
            t[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; ++i)
            for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
};

uint32_t crc_soft(const uint8_t* p, size_t n, uint32_t c) {
    static const Table tab;
    const auto& t = tab.t;
    while (n >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        v ^= c;
        c = t[7][v & 0xFF] ^ t[6][(v >> 8) & 0xFF] ^ t[5][(v >> 16) & 0xFF] ^ t[4][(v >> 24) & 0xFF] ^
            t[3][(v >> 32) & 0xFF] ^ t[2][(v >> 40) & 0xFF] ^ t[1][(v >> 48) & 0xFF] ^ t[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t c) {
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = uint32_t(c64);
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

std::string bytes_repr(const uint8_t* p, size_t n) {  // Python's repr of bytes, for the same messages
    std::string r = "b'";
    for (size_t i = 0; i < n; ++i) {
        const unsigned char c = p[i];
        if (c == '\\' || c == '\'') r += cat('\\', char(c));
        else if (c >= 32 && c < 127) r += char(c);
        else if (c == '\n') r += "\\n";
        else if (c == '\r') r += "\\r";
        else if (c == '\t') r += "\\t";
        else {
            static const char* hex = "0123456789abcdef";
            r += "\\x";
            r += hex[c >> 4];
            r += hex[c & 15];
        }
    }
    return r + "'";
}

template <class T>
T le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // (x86-64 and aarch64 Linux: little-endian, as the file)
    return v;
}

}  // namespace

uint32_t crc32c(const uint8_t* p, size_t n, uint32_t crc) {
    uint32_t c = ~crc;
#if defined(__x86_64__)
    static const bool hw = __builtin_cpu_supports("sse4.2");
    c = hw ? crc_hw(p, n, c) : crc_soft(p, n, c);
#else
    c = crc_soft(p, n, c);
#endif
    return ~c;
}

const uint8_t* check_file(const uint8_t* data, size_t size, const std::string& where, size_t& body_size) {
    if (size < kHeaderSize)
        fail<IRError>(where, ": ", size, " bytes is too short for a dyngraph file (the header alone is ", kHeaderSize, ")");
    if (std::memcmp(data, "DYNGRAPH", 8) != 0) {
        if (std::memcmp(data + 4, "DGIR", 4) == 0)
            fail<IRError>(where, ": an IR without a file header (written by dyngraph 0.1 or by write_program): "
                                 "save it again with CompiledPartition.save");
        fail<IRError>(where, ": not a dyngraph file (its first bytes are ", bytes_repr(data, 8), ", expected b'DYNGRAPH')");
    }
    const auto version = le<uint32_t>(data + 8), kind = le<uint32_t>(data + 12), want = le<uint32_t>(data + 24);
    const auto body = le<uint64_t>(data + 16);
    if (version != kFormatVersion)
        fail<IRError>(where, ": file format version ", version, " is not supported (this dyngraph reads ", kFormatVersion, ")");
    if (kind != kChecksumCrc32c) fail<IRError>(where, ": unknown checksum kind ", kind);
    for (size_t i = 28; i < kHeaderSize; ++i)
        if (data[i] != 0) fail<IRError>(where, ": the header's reserved bytes are not zero (a damaged file)");
    if (body != size - kHeaderSize)
        fail<IRError>(where, ": the header says the body has ", body, " bytes, the file has ", size - kHeaderSize,
                      " after its header (a truncated or damaged file)");
    if (crc32c(data + kHeaderSize, size_t(body)) != want)
        fail<IRError>(where, ": the checksum does not match its content (a damaged or modified file)");
    body_size = size_t(body);
    return data + kHeaderSize;
}

MappedFile::MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fail<IRError>("cannot read ", path, ": ", std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        fail<IRError>("cannot read ", path, ": ", std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        const char* kind = S_ISDIR(st.st_mode)                        ? "a directory"
                           : S_ISFIFO(st.st_mode)                     ? "a FIFO"
                           : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                      : "not a regular file";
        fail<IRError>(path, " is ", kind, ": dyngraph loads regular files only");
    }
    size_ = size_t(st.st_size);
    if (size_ == 0) {
        ::close(fd);
        return;  // (check_file refuses it: too short)
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
        size_ = 0;
        fail<IRError>("cannot read ", path, ": ", std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
}

void MappedFile::release() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
}

MappedFile::~MappedFile() { release(); }

}  // namespace dg::saved
