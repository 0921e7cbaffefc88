/* A test-only LD_PRELOAD library for mayflyd (never linked into it): while the file `<data>/fail-snapshot-reads`
 * exists, opening any `<data>/snapshots/snapshot-*` file for reading fails with EIO — a disk that cannot read the
 * snapshot a follower needs. Writes, renames and every other file are untouched. Used by disk_fault_test.cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int should_fail(const char* path, int flags) {
  if (path == NULL || (flags & O_ACCMODE) != O_RDONLY) return 0;
  const char* at = strstr(path, "/snapshots/snapshot-");
  if (at == NULL) return 0;
  char trigger[4096];
  const int n = snprintf(trigger, sizeof trigger, "%.*s/fail-snapshot-reads", (int)(at - path), path);
  if (n <= 0 || (size_t)n >= sizeof trigger) return 0;
  return access(trigger, F_OK) == 0;
}

typedef int (*open_fn)(const char*, int, ...);

static int forward(const char* symbol, const char* path, int flags, mode_t mode) {
  open_fn real = (open_fn)dlsym(RTLD_NEXT, symbol);
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real(path, flags, mode);
}

int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list args;
    va_start(args, flags);
    mode = (mode_t)va_arg(args, int);
    va_end(args);
  }
  if (should_fail(path, flags)) {
    errno = EIO;
    return -1;
  }
  return forward("open", path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list args;
    va_start(args, flags);
    mode = (mode_t)va_arg(args, int);
    va_end(args);
  }
  if (should_fail(path, flags)) {
    errno = EIO;
    return -1;
  }
  return forward("open64", path, flags, mode);
}
