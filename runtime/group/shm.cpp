// Shared-memory segments over Boost.Interprocess (see shm.h for the naming scheme).
#include "runtime/group/shm.h"

#include <dirent.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/errors.h"

namespace bip = boost::interprocess;

namespace synk::rt::shm {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InternalError(fmt::format("getrandom failed: {}", std::strerror(errno)));
    }
    got += size_t(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : buf) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

const std::string& session_prefix() {
  // Never destroyed: exit handlers that clean up run after static destructors may have.
  static const std::string* prefix = new std::string("synk-" + random_hex(16) + "-");
  return *prefix;
}

std::string process_prefix() { return fmt::format("{}p{}-", session_prefix(), getpid()); }

std::string unique_name(const std::string& prefix, std::string_view kind) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}{}{}", prefix, kind, counter.fetch_add(1));
}

Segment Segment::create(const std::string& name, size_t bytes) {
  if (bytes == 0) throw InternalError("shm::Segment::create: zero-sized segment " + name);
  Segment seg;
  try {
    bip::permissions perm(0600);
    bip::shared_memory_object obj(bip::create_only, name.c_str(), bip::read_write, perm);
    seg.name_ = name;
    seg.owns_name_ = true;
    seg.owner_pid_ = getpid();
    obj.truncate(bip::offset_t(bytes));
    seg.region_ = std::make_unique<bip::mapped_region>(obj, bip::read_write);
    seg.addr_ = seg.region_->get_address();
    seg.size_ = seg.region_->get_size();
  } catch (const bip::interprocess_exception& e) {
    if (seg.owns_name_) bip::shared_memory_object::remove(name.c_str());
    seg.owns_name_ = false;
    throw Error(fmt::format("cannot create shared-memory segment /dev/shm/{} of {} bytes: {}", name,
                            bytes, e.what()));
  }
  return seg;
}

Segment Segment::open(const std::string& name) {
  Segment seg;
  try {
    bip::shared_memory_object obj(bip::open_only, name.c_str(), bip::read_write);
    seg.region_ = std::make_unique<bip::mapped_region>(obj, bip::read_write);
    seg.name_ = name;
    seg.addr_ = seg.region_->get_address();
    seg.size_ = seg.region_->get_size();
  } catch (const bip::interprocess_exception& e) {
    throw InternalError(
        fmt::format("cannot map shared-memory segment /dev/shm/{}: {}", name, e.what()));
  }
  return seg;
}

Segment::Segment() = default;

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    region_ = std::move(other.region_);
    addr_ = other.addr_;
    size_ = other.size_;
    owns_name_ = other.owns_name_;
    owner_pid_ = other.owner_pid_;
    other.addr_ = nullptr;
    other.size_ = 0;
    other.owns_name_ = false;
  }
  return *this;
}

Segment::~Segment() { reset(); }

void Segment::remove_name() {
  if (owns_name_ && getpid() == owner_pid_) bip::shared_memory_object::remove(name_.c_str());
  owns_name_ = false;
}

void Segment::reset() {
  region_.reset();
  addr_ = nullptr;
  size_ = 0;
  remove_name();
  name_.clear();
}

namespace {
void (*g_retire_listener)(const std::string&) = nullptr;
}

void set_retire_listener(void (*listener)(const std::string& name)) { g_retire_listener = listener; }

void announce_retired(const std::string& name) {
  if (g_retire_listener) g_retire_listener(name);
}

bool remove(const std::string& name) { return bip::shared_memory_object::remove(name.c_str()); }

std::vector<std::string> list(std::string_view prefix) {
  std::vector<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return names;
  while (dirent* entry = readdir(dir)) {
    std::string_view n(entry->d_name);
    if (n.substr(0, prefix.size()) == prefix) names.emplace_back(n);
  }
  closedir(dir);
  return names;
}

size_t remove_all(std::string_view prefix) {
  size_t removed = 0;
  for (const std::string& n : list(prefix)) removed += remove(n) ? 1 : 0;
  return removed;
}

}  // namespace synk::rt::shm
