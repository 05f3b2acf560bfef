// Power-loss recorder: an LD_PRELOAD interposer (test-only) that logs every write, truncate and
// sync a process makes to chosen files, so a test can rebuild the files as a power loss could
// have left them (ALICE, OSDI '14). Only the writer process the test starts loads it.
//
//   POWERLOSS_DIRECTORY  the store's directory (absolute, as the writer names it)
//   POWERLOSS_FILES      file names in it to record, separated by ':' ("data.mdb:synced.snapshot")
//   POWERLOSS_LOG        the log, appended to with one write() per record
//
// Record: 'W'|'T'|'S' (1 byte), file index (1 byte), offset (8), length (8), then for 'W' the
// length bytes written. A write through an O_SYNC/O_DSYNC descriptor is logged as 'W' then 'S':
// durable once it returns. Markers ('M') come from the writer itself (see PowerLossLog.swift).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -2;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_msync)(void *, size_t, int);
static int (*real_sync_file_range)(int, off_t, off_t, unsigned int);

#define RESOLVE(name) \
    if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name)

// Which recorded file `fd` is (its index in POWERLOSS_FILES), or -1.
static int file_index(int fd) {
    const char *directory = getenv("POWERLOSS_DIRECTORY");
    const char *files = getenv("POWERLOSS_FILES");
    if (!directory || !files || fd < 0) return -1;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, target, sizeof target - 1);
    if (length <= 0) return -1;
    target[length] = 0;
    size_t directory_length = strlen(directory);
    if (strncmp(target, directory, directory_length) != 0 || target[directory_length] != '/') return -1;
    const char *name = target + directory_length + 1;
    int index = 0;
    for (const char *start = files; *start; index++) {
        const char *end = strchr(start, ':');
        size_t part = end ? (size_t)(end - start) : strlen(start);
        if (strlen(name) == part && strncmp(name, start, part) == 0) return index;
        if (!end) break;
        start = end + 1;
    }
    return -1;
}

static int synchronous_descriptor(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && (flags & (O_SYNC | O_DSYNC)) != 0;
}

// Appends one record; `data` may be an iovec list (count >= 0) or plain bytes (count < 0).
static void append(char type, int index, uint64_t offset, uint64_t length, const void *data, const struct iovec *iov,
                   int count) {
    RESOLVE(write);
    pthread_mutex_lock(&lock);
    if (log_fd == -2) {
        const char *path = getenv("POWERLOSS_LOG");
        log_fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
    }
    if (log_fd >= 0) {
        size_t size = 18 + (type == 'W' ? length : 0);
        unsigned char *record = malloc(size);
        if (record) {
            record[0] = (unsigned char)type;
            record[1] = (unsigned char)index;
            memcpy(record + 2, &offset, 8);
            memcpy(record + 10, &length, 8);
            if (type == 'W') {
                if (count < 0) {
                    memcpy(record + 18, data, length);
                } else {
                    uint64_t copied = 0;
                    for (int i = 0; i < count && copied < length; i++) {
                        uint64_t part = iov[i].iov_len < length - copied ? iov[i].iov_len : length - copied;
                        memcpy(record + 18 + copied, iov[i].iov_base, part);
                        copied += part;
                    }
                }
            }
            real_write(log_fd, record, size);
            free(record);
        }
    }
    pthread_mutex_unlock(&lock);
}

static void wrote(int fd, int index, off_t offset, ssize_t result, const void *data, const struct iovec *iov,
                  int count) {
    if (result <= 0) return;
    append('W', index, (uint64_t)offset, (uint64_t)result, data, iov, count);
    if (synchronous_descriptor(fd)) append('S', index, 0, 0, NULL, NULL, -1);
}

ssize_t write(int fd, const void *buffer, size_t size) {
    RESOLVE(write);
    int index = file_index(fd);
    if (index < 0) return real_write(fd, buffer, size);
    off_t offset = lseek(fd, 0, SEEK_CUR);
    ssize_t result = real_write(fd, buffer, size);
    wrote(fd, index, offset, result, buffer, NULL, -1);
    return result;
}

ssize_t pwrite(int fd, const void *buffer, size_t size, off_t offset) {
    RESOLVE(pwrite);
    ssize_t result = real_pwrite(fd, buffer, size, offset);
    int index = file_index(fd);
    if (index >= 0) wrote(fd, index, offset, result, buffer, NULL, -1);
    return result;
}

ssize_t pwrite64(int fd, const void *buffer, size_t size, off_t offset) {
    RESOLVE(pwrite64);
    ssize_t result = real_pwrite64(fd, buffer, size, offset);
    int index = file_index(fd);
    if (index >= 0) wrote(fd, index, offset, result, buffer, NULL, -1);
    return result;
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    RESOLVE(writev);
    int index = file_index(fd);
    if (index < 0) return real_writev(fd, iov, count);
    off_t offset = lseek(fd, 0, SEEK_CUR);
    ssize_t result = real_writev(fd, iov, count);
    wrote(fd, index, offset, result, NULL, iov, count);
    return result;
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    RESOLVE(pwritev);
    ssize_t result = real_pwritev(fd, iov, count, offset);
    int index = file_index(fd);
    if (index >= 0) wrote(fd, index, offset, result, NULL, iov, count);
    return result;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) { return pwritev(fd, iov, count, offset); }

int ftruncate(int fd, off_t length) {
    RESOLVE(ftruncate);
    int result = real_ftruncate(fd, length);
    int index = file_index(fd);
    if (result == 0 && index >= 0) append('T', index, 0, (uint64_t)length, NULL, NULL, -1);
    return result;
}

int ftruncate64(int fd, off_t length) {
    RESOLVE(ftruncate64);
    int result = real_ftruncate64(fd, length);
    int index = file_index(fd);
    if (result == 0 && index >= 0) append('T', index, 0, (uint64_t)length, NULL, NULL, -1);
    return result;
}

int fsync(int fd) {
    RESOLVE(fsync);
    int result = real_fsync(fd);
    int index = file_index(fd);
    if (result == 0 && index >= 0) append('S', index, 0, 0, NULL, NULL, -1);
    return result;
}

int fdatasync(int fd) {
    RESOLVE(fdatasync);
    int result = real_fdatasync(fd);
    int index = file_index(fd);
    if (result == 0 && index >= 0) append('S', index, 0, 0, NULL, NULL, -1);
    return result;
}

// Only meaningful with MDB_WRITEMAP, which the library does not use: logged as a sync of every
// recorded file would be wrong, so it is passed through and counted as nothing.
int msync(void *address, size_t length, int flags) {
    RESOLVE(msync);
    return real_msync(address, length, flags);
}

int sync_file_range(int fd, off_t offset, off_t length, unsigned int flags) {
    RESOLVE(sync_file_range);
    // Not a durability point (no metadata, no device flush): logged as nothing.
    return real_sync_file_range(fd, offset, length, flags);
}
