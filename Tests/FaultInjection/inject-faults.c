// inject-faults: an LD_PRELOAD interposer (test-only) that makes one chosen LMDB or system call
// fail in the process it is loaded into, so the library's real failure paths run. Built at test
// time by FaultInjectionLibrary (Tests/CacheTestSupport); never linked into the library.
//
// Armed by environment variables:
//   LMDBCACHE_FAULT_CALL        mdb_env_set_mapsize | mdb_txn_commit | mdb_txn_begin |
//                               mdb_env_copy2 | rename | fdatasync | statvfs
//   LMDBCACHE_FAULT_ERROR       the error, as a number (an errno value or an LMDB code)
//   LMDBCACHE_FAULT_OCCURRENCE  "N": fail the Nth call (from 1); "N+": that call and every later one
//   LMDBCACHE_FAULT_REPORT      when set, how often each call was made is printed on stderr at exit
//   LMDBCACHE_ABORT_ON_BAD_CLOSE when set, a close() of a descriptor that is not open aborts
//
// mdb_env_set_mapsize is not failed by itself: the mmap calls LMDB makes inside it fail, so
// LMDB's own failure path runs (it has unmapped the old map by then). mdb_txn_commit aborts the
// transaction before failing, as LMDB's commit frees it on every failure. Every injected failure
// is reported on stderr as "inject-faults: injected CALL #N -> ERROR".
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

static unsigned long call_counts[8];
static __thread int inside_set_mapsize;

enum {
    CALL_SET_MAPSIZE,
    CALL_TXN_COMMIT,
    CALL_TXN_BEGIN,
    CALL_ENV_COPY2,
    CALL_RENAME,
    CALL_FDATASYNC,
    CALL_STATVFS,
};
static const char *const call_names[] = {
    "mdb_env_set_mapsize", "mdb_txn_commit", "mdb_txn_begin", "mdb_env_copy2", "rename", "fdatasync", "statvfs",
};

static void *real(const char *name) {
    void *function = dlsym(RTLD_NEXT, name);
    if (!function) {
        static const char message[] = "inject-faults: a real function is missing\n";
        write(2, message, sizeof message - 1);
        abort();
    }
    return function;
}

// The error to inject into this call of `call`, or 0 to let it through. Counts every call.
static int armed(int call) {
    unsigned long number = __atomic_add_fetch(&call_counts[call], 1, __ATOMIC_RELAXED);
    const char *chosen = getenv("LMDBCACHE_FAULT_CALL");
    if (!chosen || strcmp(chosen, call_names[call]) != 0) return 0;
    const char *error = getenv("LMDBCACHE_FAULT_ERROR");
    const char *occurrence = getenv("LMDBCACHE_FAULT_OCCURRENCE");
    if (!error || !occurrence) return 0;
    char *end;
    unsigned long first = strtoul(occurrence, &end, 10);
    int onward = *end == '+';
    if (number != first && !(onward && number > first)) return 0;
    int code = atoi(error);
    char line[160];
    int length = snprintf(line, sizeof line, "inject-faults: injected %s #%lu -> %d\n", call_names[call], number, code);
    if (length > 0) write(2, line, (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
    return code;
}

int mdb_env_set_mapsize(MDB_env *env, size_t size) {
    static int (*next)(MDB_env *, size_t);
    if (!next) next = real("mdb_env_set_mapsize");
    int code = armed(CALL_SET_MAPSIZE);
    inside_set_mapsize = code;
    int result = next(env, size);
    inside_set_mapsize = 0;
    return result;
}

void *mmap(void *address, size_t length, int protection, int flags, int descriptor, off_t offset) {
    static void *(*next)(void *, size_t, int, int, int, off_t);
    if (!next) next = real("mmap");
    if (inside_set_mapsize) {
        errno = inside_set_mapsize;
        return MAP_FAILED;
    }
    return next(address, length, protection, flags, descriptor, offset);
}

int mdb_txn_commit(MDB_txn *txn) {
    static int (*next)(MDB_txn *);
    static void (*abort_transaction)(MDB_txn *);
    if (!next) next = real("mdb_txn_commit");
    if (!abort_transaction) abort_transaction = real("mdb_txn_abort");
    int code = armed(CALL_TXN_COMMIT);
    if (code) {
        abort_transaction(txn);
        return code;
    }
    return next(txn);
}

int mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags, MDB_txn **txn) {
    static int (*next)(MDB_env *, MDB_txn *, unsigned int, MDB_txn **);
    if (!next) next = real("mdb_txn_begin");
    int code = armed(CALL_TXN_BEGIN);
    if (code) return code;
    return next(env, parent, flags, txn);
}

int mdb_env_copy2(MDB_env *env, const char *path, unsigned int flags) {
    static int (*next)(MDB_env *, const char *, unsigned int);
    if (!next) next = real("mdb_env_copy2");
    int code = armed(CALL_ENV_COPY2);
    if (code) return code;
    return next(env, path, flags);
}

int rename(const char *from, const char *to) {
    static int (*next)(const char *, const char *);
    if (!next) next = real("rename");
    int code = armed(CALL_RENAME);
    if (code) {
        errno = code;
        return -1;
    }
    return next(from, to);
}

int fdatasync(int descriptor) {
    static int (*next)(int);
    if (!next) next = real("fdatasync");
    int code = armed(CALL_FDATASYNC);
    if (code) {
        errno = code;
        return -1;
    }
    return next(descriptor);
}

int statvfs(const char *path, struct statvfs *result) {
    static int (*next)(const char *, struct statvfs *);
    if (!next) next = real("statvfs");
    int code = armed(CALL_STATVFS);
    if (code) {
        errno = code;
        return -1;
    }
    return next(path, result);
}

int fstatvfs(int descriptor, struct statvfs *result) {
    static int (*next)(int, struct statvfs *);
    if (!next) next = real("fstatvfs");
    int code = armed(CALL_STATVFS);
    if (code) {
        errno = code;
        return -1;
    }
    return next(descriptor, result);
}

// With LMDBCACHE_ABORT_ON_BAD_CLOSE set, a close() of a descriptor that is not open aborts the
// process: closing a number twice closes whatever another thread was given under it meanwhile.
int close(int descriptor) {
    static int (*next)(int);
    if (!next) next = real("close");
    int result = next(descriptor);
    if (result != 0 && errno == EBADF && getenv("LMDBCACHE_ABORT_ON_BAD_CLOSE")) {
        char line[96];
        int length = snprintf(line, sizeof line, "inject-faults: close(%d) of a descriptor not open\n", descriptor);
        if (length > 0) write(2, line, (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
        abort();
    }
    return result;
}

// How often each call was made, for choosing occurrences worth failing.
__attribute__((destructor)) static void report_counts(void) {
    if (!getenv("LMDBCACHE_FAULT_REPORT")) return;
    for (int call = 0; call <= CALL_STATVFS; call++) {
        char line[96];
        int length = snprintf(line, sizeof line, "inject-faults: %s called %lu times\n", call_names[call],
                              __atomic_load_n(&call_counts[call], __ATOMIC_RELAXED));
        if (length > 0) write(2, line, (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
    }
}
