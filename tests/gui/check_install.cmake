# Installs the build into a throw-away staging folder (DESTDIR) under /usr/local and checks that
# a desktop gets what it needs: both executables, the .desktop entry pointing at the installed
# executable and icon, the SVG icon in the hicolor theme, the README the Help menu opens (with
# every document its links reach) and the bundled corpus; and that the installed workbench answers --version without a display.
# cmake -DBUILD_DIR=... -DSTAGE=... -P check_install.cmake
file(REMOVE_RECURSE "${STAGE}")
set(ENV{DESTDIR} "${STAGE}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix /usr/local
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}): ${err}")
endif()
set(root "${STAGE}/usr/local")
foreach(f bin/snip-workbench bin/snip share/applications/snip-workbench.desktop
          share/icons/hicolor/scalable/apps/snip-workbench.svg share/doc/snip-workbench/README.md
          share/snip-workbench/corpus/kjv.txt.gz)
  if(NOT EXISTS "${root}/${f}")
    message(FATAL_ERROR "cmake --install did not install ${f} (under ${root})")
  endif()
endforeach()
# Every relative link of the installed documentation reaches an installed file (a link to a
# data archive, e.g. regimes/data.tar.xz, is left to the repository).
file(GLOB_RECURSE docs "${root}/share/doc/snip-workbench/*.md")
foreach(doc ${docs})
  file(READ "${doc}" text)
  get_filename_component(dir "${doc}" DIRECTORY)
  # (Matched from "](" but kept without the bracket: CMake lists do not split inside [ ].)
  string(REGEX MATCHALL "\\]\\(([A-Za-z0-9_./-]+\\.(md|png))[)#]" links "${text}")
  string(REPLACE "](" "(" links "${links}")
  foreach(link ${links})
    string(REGEX REPLACE "^\\(([^)#]+)[)#]$" "\\1" target "${link}")
    if(NOT EXISTS "${dir}/${target}")
      message(FATAL_ERROR "${doc} links to ${target}, which is not installed")
    endif()
  endforeach()
endforeach()
file(READ "${root}/share/applications/snip-workbench.desktop" desktop)
foreach(line "[Desktop Entry]" "Type=Application" "Name=SNIP Workbench" "Exec=snip-workbench" "Icon=snip-workbench"
             "Terminal=false")
  string(FIND "${desktop}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the installed .desktop entry lacks '${line}':\n${desktop}")
  endif()
endforeach()
file(READ "${root}/share/icons/hicolor/scalable/apps/snip-workbench.svg" icon)
string(FIND "${icon}" "<svg" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the installed icon is not an SVG image")
endif()
# The installed executable runs and answers without a display.
execute_process(COMMAND "${CMAKE_COMMAND}" -E env --unset=DISPLAY --unset=WAYLAND_DISPLAY --unset=QT_QPA_PLATFORM
                        "${root}/bin/snip-workbench" --version
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^snip-workbench [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "installed snip-workbench --version: exit ${rc}, '${out}' '${err}'")
endif()
file(REMOVE_RECURSE "${STAGE}")
message(STATUS "installed: ${out}")
