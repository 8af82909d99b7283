/* hoardcat: print files stored in a DwarFS image, using hoard's C API.
 *
 *   cc -o hoardcat hoardcat.c $(pkg-config --cflags --libs hoard)
 *   ./hoardcat image.dwarfs path/in/image [more/paths...]
 */
#include <errno.h>
#include <hoard.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s IMAGE PATH...\n", argv[0]);
        return 2;
    }
    hoard_image *img = hoard_open(argv[1]);
    if (!img) {
        fprintf(stderr, "hoardcat: %s\n", hoard_last_error());
        return 1;
    }
    int status = 0;
    static char buf[1 << 16];
    for (int i = 2; i < argc; i++) {
        off_t offset = 0;
        ssize_t n;
        while ((n = hoard_read(img, argv[i], buf, sizeof buf, offset)) > 0) {
            fwrite(buf, 1, (size_t)n, stdout);
            offset += n;
        }
        if (n < 0) {
            fprintf(stderr, "hoardcat: %s: %s (%s)\n", argv[i], hoard_last_error(), strerror((int)-n));
            status = 1;
        }
    }
    hoard_close(img);
    return status;
}
