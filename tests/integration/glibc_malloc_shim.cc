// Preloaded (with libfaketime) into a mayflyd whose wall clock a test skews: every allocation goes to the C
// library's malloc instead of jemalloc, which mayflyd links.
//
// Why: jemalloc reads the monotonic clock while it initializes, under its init lock; with libfaketime preloaded that
// clock_gettime is faketime's, whose first call looks its symbols up with dlsym, which callocs — into jemalloc,
// which waits for its own lock: the node hangs at start. With this shim first in LD_PRELOAD, malloc and operator new
// resolve here and reach glibc's allocator, so nothing initializes jemalloc at start (a metrics scrape's mallctl may
// later, when libfaketime is long initialized). Both the C and the C++ entry points are replaced, so memory from
// either is freed by the same allocator.
#include <dlfcn.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>

extern "C" {
void* __libc_malloc(size_t size);
void __libc_free(void* pointer);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* pointer, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);

void* malloc(size_t size) { return __libc_malloc(size); }
void free(void* pointer) { __libc_free(pointer); }
void* calloc(size_t count, size_t size) { return __libc_calloc(count, size); }
void* realloc(void* pointer, size_t size) { return __libc_realloc(pointer, size); }
void* memalign(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }
void* aligned_alloc(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }
void* valloc(size_t size) { return __libc_valloc(size); }
void* pvalloc(size_t size) { return __libc_pvalloc(size); }
int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* pointer = __libc_memalign(alignment, size);
  if (pointer == nullptr) return ENOMEM;
  *out = pointer;
  return 0;
}
size_t malloc_usable_size(void* pointer) {
  // glibc's own, not the next definition (jemalloc's): looked up in libc.so.6 itself.
  using Fn = size_t (*)(void*);
  static Fn glibc = reinterpret_cast<Fn>(dlsym(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), "malloc_usable_size"));
  return glibc != nullptr ? glibc(pointer) : 0;
}
}  // extern "C"

namespace {

void* allocate(size_t size) {
  for (;;) {
    if (void* pointer = __libc_malloc(size == 0 ? 1 : size)) return pointer;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* allocate_aligned(size_t size, std::align_val_t alignment) {
  for (;;) {
    if (void* pointer = __libc_memalign(static_cast<size_t>(alignment), size == 0 ? 1 : size)) return pointer;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

void* operator new(size_t size) { return allocate(size); }
void* operator new[](size_t size) { return allocate(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept { return __libc_malloc(size == 0 ? 1 : size); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return __libc_malloc(size == 0 ? 1 : size); }
void* operator new(size_t size, std::align_val_t alignment) { return allocate_aligned(size, alignment); }
void* operator new[](size_t size, std::align_val_t alignment) { return allocate_aligned(size, alignment); }
void* operator new(size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return __libc_memalign(static_cast<size_t>(alignment), size == 0 ? 1 : size);
}
void* operator new[](size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return __libc_memalign(static_cast<size_t>(alignment), size == 0 ? 1 : size);
}
void operator delete(void* pointer) noexcept { __libc_free(pointer); }
void operator delete[](void* pointer) noexcept { __libc_free(pointer); }
void operator delete(void* pointer, size_t) noexcept { __libc_free(pointer); }
void operator delete[](void* pointer, size_t) noexcept { __libc_free(pointer); }
void operator delete(void* pointer, const std::nothrow_t&) noexcept { __libc_free(pointer); }
void operator delete[](void* pointer, const std::nothrow_t&) noexcept { __libc_free(pointer); }
void operator delete(void* pointer, std::align_val_t) noexcept { __libc_free(pointer); }
void operator delete[](void* pointer, std::align_val_t) noexcept { __libc_free(pointer); }
void operator delete(void* pointer, size_t, std::align_val_t) noexcept { __libc_free(pointer); }
void operator delete[](void* pointer, size_t, std::align_val_t) noexcept { __libc_free(pointer); }
void operator delete(void* pointer, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(pointer); }
void operator delete[](void* pointer, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(pointer); }
