# Warnings and sanitizers as INTERFACE targets: link them into our own targets
# only, so third-party code and users of the library are not affected.
add_library(tsarchive_warnings INTERFACE)
target_compile_options(tsarchive_warnings INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic)
if(TSARCHIVE_WERROR)
  target_compile_options(tsarchive_warnings INTERFACE -Werror)
endif()

add_library(tsarchive_sanitizers INTERFACE)
if(TSARCHIVE_SANITIZE)
  target_compile_options(tsarchive_sanitizers INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                         -fno-sanitize-recover=undefined)
  target_link_options(tsarchive_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
