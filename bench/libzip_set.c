/* bench/libzip_set.c: what a plain libzip program does to set one extra file:
 * zip_open, zip_file_add(ZIP_FL_OVERWRITE), zip_close (libzip rewrites the
 * whole archive into a temp file and renames it). Used by bench/extra.sh as
 * the "libzip rewrite" baseline.   libzip_set ARCHIVE ENTRY VALUE */
#include <stdio.h>
#include <string.h>
#include <zip.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s ARCHIVE ENTRY VALUE\n", argv[0]);
    return 2;
  }
  int err = 0;
  zip_t* za = zip_open(argv[1], 0, &err);
  if (za == NULL) {
    fprintf(stderr, "cannot open %s (libzip error %d)\n", argv[1], err);
    return 1;
  }
  zip_source_t* src = zip_source_buffer(za, argv[3], strlen(argv[3]), 0);
  if (src == NULL || zip_file_add(za, argv[2], src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8) < 0) {
    fprintf(stderr, "cannot add: %s\n", zip_strerror(za));
    return 1;
  }
  if (zip_close(za) != 0) {
    fprintf(stderr, "cannot write: %s\n", zip_strerror(za));
    return 1;
  }
  return 0;
}
