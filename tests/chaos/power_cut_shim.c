// A test-only LD_PRELOAD library for the fault campaign: a volatile write cache for the write-ahead logs — the Raft
// log's segments (wal/<20 digits>.log) and LevelDB's own logs (db/<digits>.log) — so that SIGKILL behaves like a power
// cut for them.
//
// A SIGKILL alone loses nothing a process wrote: its write()s are in the kernel's page cache. This library keeps the
// bytes written to such a log file (a name of digits ending in ".log", opened for writing) in the process's own
// memory until fsync/fdatasync on that file (or its close) writes them out, in order. A SIGKILL then loses exactly
// the unsynced tail, as a power cut could; what was synced survives. Everything else passes straight through.
//
// Limits: directory entries (creates, renames) are durable at once, as in the simulator; a closed file's unsynced
// bytes are written at close (a power cut could lose those too, so this is the milder fault).
//
// Thread-safety: one mutex around the table of tracked descriptors.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TRACKED_FD 65536

struct pending {
  int tracked;
  char* data;
  size_t size;
  size_t capacity;
};

static struct pending table[MAX_TRACKED_FD];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t real_write(int fd, const void* buffer, size_t count) {
  static ssize_t (*function)(int, const void*, size_t) = NULL;
  if (function == NULL) function = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  return function(fd, buffer, count);
}

// A write-ahead log: "<digits>.log" (a Raft WAL segment or a LevelDB log).
static int is_write_ahead_log(const char* path) {
  const char* base = strrchr(path, '/');
  base = base == NULL ? path : base + 1;
  const size_t length = strlen(base);
  if (length < 5 || strcmp(base + length - 4, ".log") != 0) return 0;
  for (size_t i = 0; i + 4 < length; ++i) {
    if (base[i] < '0' || base[i] > '9') return 0;
  }
  return 1;
}

static void track(int fd, const char* path, int flags) {
  if (fd < 0 || fd >= MAX_TRACKED_FD || (flags & (O_WRONLY | O_RDWR)) == 0 || !is_write_ahead_log(path)) return;
  pthread_mutex_lock(&table_lock);
  free(table[fd].data);
  table[fd] = (struct pending){1, NULL, 0, 0};
  pthread_mutex_unlock(&table_lock);
}

// Writes fd's cached bytes out; the caller holds the lock. Returns 0, or -1 with errno.
static int flush_locked(int fd) {
  struct pending* p = &table[fd];
  size_t done = 0;
  int result = 0;
  while (done < p->size) {
    const ssize_t n = real_write(fd, p->data + done, p->size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      result = -1;  // e.g. ENOSPC: what was not written stays cached, never written twice
      break;
    }
    done += (size_t)n;
  }
  memmove(p->data, p->data + done, p->size - done);
  p->size -= done;
  return result;
}

static int flush(int fd) {
  if (fd < 0 || fd >= MAX_TRACKED_FD) return 0;
  pthread_mutex_lock(&table_lock);
  const int result = table[fd].tracked ? flush_locked(fd) : 0;
  pthread_mutex_unlock(&table_lock);
  return result;
}

int open(const char* path, int flags, ...) {
  static int (*function)(const char*, int, ...) = NULL;
  if (function == NULL) function = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open");
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list args;
    va_start(args, flags);
    mode = va_arg(args, mode_t);
    va_end(args);
  }
  const int fd = function(path, flags, mode);
  track(fd, path, flags);
  return fd;
}

int open64(const char* path, int flags, ...) {
  static int (*function)(const char*, int, ...) = NULL;
  if (function == NULL) function = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open64");
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list args;
    va_start(args, flags);
    mode = va_arg(args, mode_t);
    va_end(args);
  }
  const int fd = function(path, flags, mode);
  track(fd, path, flags);
  return fd;
}

int openat(int dir, const char* path, int flags, ...) {
  static int (*function)(int, const char*, int, ...) = NULL;
  if (function == NULL) function = (int (*)(int, const char*, int, ...))dlsym(RTLD_NEXT, "openat");
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list args;
    va_start(args, flags);
    mode = va_arg(args, mode_t);
    va_end(args);
  }
  const int fd = function(dir, path, flags, mode);
  track(fd, path, flags);
  return fd;
}

ssize_t write(int fd, const void* buffer, size_t count) {
  if (fd >= 0 && fd < MAX_TRACKED_FD) {
    pthread_mutex_lock(&table_lock);
    struct pending* p = &table[fd];
    if (p->tracked) {
      if (p->size + count > p->capacity) {
        size_t capacity = p->capacity == 0 ? 65536 : p->capacity;
        while (capacity < p->size + count) capacity *= 2;
        char* grown = realloc(p->data, capacity);
        if (grown == NULL) {
          pthread_mutex_unlock(&table_lock);
          errno = ENOMEM;
          return -1;
        }
        p->data = grown;
        p->capacity = capacity;
      }
      memcpy(p->data + p->size, buffer, count);
      p->size += count;
      pthread_mutex_unlock(&table_lock);
      return (ssize_t)count;
    }
    pthread_mutex_unlock(&table_lock);
  }
  return real_write(fd, buffer, count);
}

int fsync(int fd) {
  static int (*function)(int) = NULL;
  if (function == NULL) function = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (flush(fd) != 0) return -1;
  return function(fd);
}

int fdatasync(int fd) {
  static int (*function)(int) = NULL;
  if (function == NULL) function = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  if (flush(fd) != 0) return -1;
  return function(fd);
}

int close(int fd) {
  static int (*function)(int) = NULL;
  if (function == NULL) function = (int (*)(int))dlsym(RTLD_NEXT, "close");
  if (fd >= 0 && fd < MAX_TRACKED_FD) {
    pthread_mutex_lock(&table_lock);
    if (table[fd].tracked) {
      flush_locked(fd);
      free(table[fd].data);
      table[fd] = (struct pending){0, NULL, 0, 0};
    }
    pthread_mutex_unlock(&table_lock);
  }
  return function(fd);
}
