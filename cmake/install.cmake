# cmake --install build --prefix P: pipetrain in P/bin, its SentencePiece
# module in P/lib/pipetrain (where it looks, beside bin/), the user docs in
# P/share/doc/pipetrain. The zoo's models are built into the binary.
# CPack (cd build && cpack -G DEB) packages the same tree as a .deb whose
# dependencies dpkg-shlibdeps reads off the binaries' libraries: Debian's
# package names.
install(TARGETS pipetrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET pipetrain_sentencepiece)
  install(TARGETS pipetrain_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/pipetrain)
endif()
install(FILES README.md CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME pipetrain)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "pipetrain")
set(CPACK_PACKAGE_CONTACT "pipetrain developers <pipetrain@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Train ONNX models with PipeDream-style pipeline parallelism")
set(CPACK_PACKAGE_FILE_NAME "${CPACK_PACKAGE_NAME}_${PROJECT_VERSION}_amd64")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The OpenMP build of OpenBLAS, which the RUNPATH picks (CMakeLists.txt says why):
# shlibdeps names only the soname's generic package.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-openmp")
# The data the demo and --data names read, from Debian, suggested not required.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "dataset-fashion-mnist, python3-sklearn, fortunes, openmpi-bin")
if(PIPETRAIN_NATIVE)
  set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
      "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}\n Built with -march=native: it runs on CPUs like the build machine's.")
elseif(PIPETRAIN_MARCH)
  set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
      "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}\n Built for ${PIPETRAIN_MARCH} CPUs.")
endif()
include(CPack)
