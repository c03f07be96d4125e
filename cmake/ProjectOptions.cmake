# Warnings and sanitizers as INTERFACE targets: link them into our own targets
# only, so third-party code and users of the library are not affected.
add_library(tsarchive_warnings INTERFACE)
target_compile_options(tsarchive_warnings INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic)
if(TSARCHIVE_WERROR)
  target_compile_options(tsarchive_warnings INTERFACE -Werror)
endif()

# -fno-sanitize=vptr: UBSan's dynamic-type check needs the typeinfo of every
# polymorphic class it sees, and libtorch does not export some of it
# (c10::DynamicType): the torch layer would not load.
add_library(tsarchive_sanitizers INTERFACE)
if(TSARCHIVE_SANITIZE)
  target_compile_options(tsarchive_sanitizers INTERFACE -fsanitize=address,undefined -fno-sanitize=vptr
                         -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(tsarchive_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
