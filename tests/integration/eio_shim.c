/* A test-only LD_PRELOAD library for mayflyd (never linked into it), for disk_fault_test.cc:
 * - while the file `<data>/fail-snapshot-reads` exists, opening any `<data>/snapshots/snapshot-*` file for reading
 *   fails with EIO — a disk that cannot read the snapshot a follower needs;
 * - while `<data>/fail-db-syncs` exists, fsync/fdatasync of any file under `<data>/db/` (LevelDB: the state) or
 *   `<data>/wal/` (the Raft log) fails with EIO;
 * - while `<data>/fail-log-reads` exists, opening any file under `<data>/wal/` (the Raft log's segments) for reading
 *   fails with EIO — a disk that cannot read the log a follower needs.
 * Everything else is untouched. */
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
  const char* trigger_name = "fail-snapshot-reads";
  const char* at = strstr(path, "/snapshots/snapshot-");
  if (at == NULL) {
    trigger_name = "fail-log-reads";
    at = strstr(path, "/wal/");
  }
  if (at == NULL) return 0;
  char trigger[4096];
  const int n = snprintf(trigger, sizeof trigger, "%.*s/%s", (int)(at - path), path, trigger_name);
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

static int open_or_fail(const char* symbol, const char* path, int flags, mode_t mode) {
  if (should_fail(path, flags)) {
    errno = EIO;
    return -1;
  }
  return forward(symbol, path, flags, mode);
}

/* The mode argument is there only with O_CREAT or O_TMPFILE. */
#define MODE_ARGUMENT(flags, mode)               \
  do {                                           \
    if ((flags) & (O_CREAT | O_TMPFILE)) {       \
      va_list args;                              \
      va_start(args, flags);                     \
      (mode) = (mode_t)va_arg(args, int);        \
      va_end(args);                              \
    }                                            \
  } while (0)

int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARGUMENT(flags, mode);
  return open_or_fail("open", path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARGUMENT(flags, mode);
  return open_or_fail("open64", path, flags, mode);
}

/* The data directory's trigger for an fd's file under `<data>/db/` or `<data>/wal/`. */
static int fd_should_fail(int fd) {
  char link[64];
  char path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  const char* at = strstr(path, "/db/");
  if (at == NULL) at = strstr(path, "/wal/");
  if (at == NULL) return 0;
  char trigger[4096];
  const int m = snprintf(trigger, sizeof trigger, "%.*s/fail-db-syncs", (int)(at - path), path);
  if (m <= 0 || (size_t)m >= sizeof trigger) return 0;
  return access(trigger, F_OK) == 0;
}

typedef int (*sync_fn)(int);

static int forward_sync(const char* symbol, int fd) {
  sync_fn real = (sync_fn)dlsym(RTLD_NEXT, symbol);
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real(fd);
}

int fsync(int fd) {
  if (fd_should_fail(fd)) {
    errno = EIO;
    return -1;
  }
  return forward_sync("fsync", fd);
}

int fdatasync(int fd) {
  if (fd_should_fail(fd)) {
    errno = EIO;
    return -1;
  }
  return forward_sync("fdatasync", fd);
}
