/* Test program for hoard's C API: prints one line per entry of an image,
 * or of a stack of images given bottom first (hoard_open_layers, options zeroed) (path, kind, mode, owner, size, mtime, link count, device, symlink
 * target, SHA-256 of the contents), for the Rust test to compare with the
 * image's manifest. Reads alternate between hoard_read by path and
 * hoard_read_inode, in chunks of varying size. Also checks the error
 * returns. Exits 1 on any unexpected result. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <hoard.h>
#include "sha256.h"

static hoard_image *img;
static int files_read;

static void fail(const char *what, const char *path, long rc) {
    fprintf(stderr, "%s '%s': %ld (%s)\n", what, path, rc, hoard_last_error() ? hoard_last_error() : "no message");
    exit(1);
}

/* Prints a path with backslash, tab and newline escaped. */
static void print_path(const char *p) {
    if (!*p) {
        fputs(".", stdout);
        return;
    }
    for (; *p; p++) {
        if (*p == '\\') fputs("\\\\", stdout);
        else if (*p == '\n') fputs("\\n", stdout);
        else if (*p == '\t') fputs("\\t", stdout);
        else putchar(*p);
    }
}

static char kind(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFDIR: return 'd';
    case S_IFLNK: return 'l';
    case S_IFREG: return 'f';
    case S_IFCHR: return 'c';
    case S_IFBLK: return 'b';
    case S_IFIFO: return 'p';
    default: return 's';
    }
}

static void hash_file(const char *path, const struct stat *st, char hex[65]) {
    static char buf[1 << 20];
    sha256_ctx c;
    sha256_init(&c);
    int64_t ino = hoard_lookup(img, path);
    if (ino < 0 || (uint64_t)ino != st->st_ino) fail("lookup", path, (long)ino);
    off_t off = 0;
    size_t chunk = 1 + (size_t)(st->st_ino * 7919 % 300000);
    int by_inode = files_read++ % 2;
    for (;;) {
        ssize_t n = by_inode ? hoard_read_inode(img, (uint64_t)ino, buf, chunk, off)
                             : hoard_read(img, path, buf, chunk, off);
        if (n < 0) fail("read", path, n);
        if (n == 0) break;
        sha256_update(&c, buf, (size_t)n);
        off += n;
        chunk = chunk * 3 % (sizeof buf - 1) + 1;
    }
    if (off != st->st_size) fail("short read of", path, (long)off);
    sha256_hex(&c, hex);
}

static void print_entry(const char *path, const struct stat *st) {
    char target[4096] = "-", hex[65] = "-", size[32] = "-", nlink[32] = "-", rdev[32] = "-";
    char k = kind(st->st_mode);
    if (k == 'l') {
        int n = hoard_readlink(img, path, target, sizeof target);
        if (n < 0 || n != st->st_size) fail("readlink", path, n);
    }
    if (k == 'f') {
        hash_file(path, st, hex);
        snprintf(nlink, sizeof nlink, "%lu", (unsigned long)st->st_nlink);
    }
    if (k == 'f' || k == 'l') snprintf(size, sizeof size, "%lld", (long long)st->st_size);
    if (k == 'c' || k == 'b') snprintf(rdev, sizeof rdev, "%u,%u", major(st->st_rdev), minor(st->st_rdev));
    print_path(path);
    printf("\t%c\t%04o\t%u\t%u\t%s\t%lld\t%ld\t%s\t%s\t", k, (unsigned)(st->st_mode & 07777), st->st_uid, st->st_gid,
           size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, nlink, rdev);
    print_path(target);
    printf("\t%s\n", hex);
}

struct names {
    char **items;
    size_t len, cap;
};

static int collect(const char *name, const struct stat *st, void *ctx) {
    struct names *n = ctx;
    (void)st;
    if (n->len == n->cap) {
        n->cap = n->cap ? 2 * n->cap : 16;
        n->items = realloc(n->items, n->cap * sizeof *n->items);
    }
    n->items[n->len++] = strdup(name);
    return 0;
}

static void walk(const char *path) {
    struct stat st;
    int rc = hoard_stat(img, path, &st);
    if (rc != 0) fail("stat", path, rc);
    print_entry(path, &st);
    if (!S_ISDIR(st.st_mode)) return;
    struct names names = {0};
    rc = hoard_readdir(img, path, collect, &names);
    if (rc != 0) fail("readdir", path, rc);
    for (size_t i = 0; i < names.len; i++) {
        size_t len = strlen(path) + strlen(names.items[i]) + 2;
        char *child = malloc(len);
        snprintf(child, len, "%s%s%s", path, *path ? "/" : "", names.items[i]);
        walk(child);
        free(child);
        free(names.items[i]);
    }
    free(names.items);
}

static int stop_at_first(const char *name, const struct stat *st, void *ctx) {
    (void)name;
    (void)st;
    ++*(int *)ctx;
    return 1;
}

/* The error returns: each must be the documented -errno with a message. */
static void check_errors(void) {
    struct stat st;
    char buf[1];
    int calls = 0;
    if (hoard_open("/nonexistent/image.dwarfs") != NULL || !strstr(hoard_last_error(), "image.dwarfs"))
        fail("open of a missing image", "/nonexistent/image.dwarfs", 0);
    if (hoard_stat(img, "no/such/entry", &st) != -ENOENT || !strstr(hoard_last_error(), "no/such/entry"))
        fail("stat of a missing entry", "no/such/entry", 0);
    if (hoard_read(img, "", buf, 1, 0) != -EISDIR) fail("read of the root", "", 0);
    if (hoard_readlink(img, "", buf, 1) != -EINVAL) fail("readlink of the root", "", 0);
    if (hoard_readdir(img, "", stop_at_first, &calls) != 0 || calls != 1) fail("stopped readdir", "", calls);
    if (hoard_read(NULL, "", buf, 1, 0) != -EINVAL) fail("read with a NULL image", "", 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s IMAGE [LAYER...]\n", argv[0]);
        return 2;
    }
    hoard_open_options defaults = {0};
    img = argc == 2 ? hoard_open(argv[1]) : hoard_open_layers((const char *const *)argv + 1, (size_t)argc - 1, &defaults);
    if (!img) fail("open", argv[argc - 1], 0);
    check_errors();
    walk("");
    hoard_close(img);
    return 0;
}
