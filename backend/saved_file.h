// Saved compiled partitions as files, read in C++ (the C API's loader): the
// 64-byte header and the body's CRC-32C, as dyngraph/serialization.py writes
// and checks them (same checks, same messages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dg::saved {

constexpr size_t kHeaderSize = 64;
constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kChecksumCrc32c = 1;

// CRC-32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2.
uint32_t crc32c(const uint8_t* p, size_t n, uint32_t crc = 0);

// A whole file image (header + body): the header is checked against `size`, the body against its checksum.
// Returns the body (inside `data`) and sets `body_size`. IRError naming `where` otherwise.
const uint8_t* check_file(const uint8_t* data, size_t size, const std::string& where, size_t& body_size);

// A regular file, memory-mapped read-only (IRError naming the path when it cannot be, or is not a regular
// file: a FIFO or a device is refused without blocking).
class MappedFile {
public:
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    void release();  // unmap now

private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace dg::saved
