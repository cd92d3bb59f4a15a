// Resolving a dlopen'd library's entry points into a table of function pointers, the one way the
// CUDA driver, cuBLAS, NVRTC and NCCL loaders do it: each entry point by its name (or the first
// of several names, for versioned symbols such as cuMemFree_v2), and the first required one that
// is missing becomes the load error, "<library> has no entry point <name>". Never throws, so a
// machine without the library (or with an old one) only loses that backend.
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

namespace synk::rt::cuda {

class SymbolTable {
 public:
  // `library` names the library in the error ("libcublas.so.13", "the CUDA driver").
  SymbolTable(void* handle, std::string library) : handle_(handle), library_(std::move(library)) {}

  // Sets `fn` to the first of `names` the library defines; if none and `required`, the table
  // fails (the first failure is the one reported).
  template <class Fn>
  void resolve(Fn& fn, std::initializer_list<const char*> names, bool required = true) {
    static_assert(std::is_pointer_v<Fn>, "resolve() fills a function pointer");
    for (const char* name : names) {
      if (void* sym = dlsym(handle_, name)) {
        fn = reinterpret_cast<Fn>(sym);
        return;
      }
    }
    fn = nullptr;
    if (required && error_.empty()) error_ = library_ + " has no entry point " + *names.begin();
  }
  template <class Fn>
  void resolve(Fn& fn, const char* name, bool required = true) {
    resolve(fn, {name}, required);
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }   // empty when every required one resolved

 private:
  void* handle_;
  std::string library_;
  std::string error_;
};

}  // namespace synk::rt::cuda
