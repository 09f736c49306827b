#!/bin/sh
# Builds ns-2.35 with the AQMs Järvinen & Kojo ran that Debian's ns2 package lacks: Pollere's
# CoDel patch (queue/codel.cc), Nichols' sfqCoDel (queue/sfqcodel.cc) and the Cisco/CableLabs
# PIE ns-2 code (queue/pie.cc). Nothing of theirs is committed here: this script fetches or is
# given their sources and builds in a scratch directory. Only the fixture recording needs the
# result (tools/ns2/README.md); CI uses the committed fixtures and Debian's stock ns.
#
#   [HBATMIT_GIT=dir] tools/ns2/build-patched-ns2.sh BUILD_DIR PIE_DIR
#
# BUILD_DIR  scratch directory (e.g. /tmp/ns2build); the binaries end up as BUILD_DIR/ns-2.35/ns
#            and BUILD_DIR/ns-2.35/ns-pie2013r (step 6)
# PIE_DIR    a directory holding pie.cc and pie.h of the Cisco/CableLabs ns-2 PIE code
#            ("Copyright (c) 2013-2014, Cisco Systems, Inc. / Cable Television Laboratories").
#            No public git repository of it was found; the copy used for the fixtures is the
#            one stored in the code-search index (stored-file ids 7219863769 = pie.cc,
#            7234016008 = pie.h), see README.md.
#
# Sources:
#   ns-2.35        Debian's source package ns2 2.35+dfsg-5 (orig tarball: `apt-get source
#                  ns2` with a deb-src line, or its ns2_2.35+dfsg.orig.tar.xz from any mirror).
#                  Debian's own build (cmake + debian/patches) is not used: its
#                  .debian.tar.xz was not downloadable here, so this script builds with the
#                  upstream Makefile.in and a hand-written autoconf.h instead of configure.
#   CoDel          https://github.com/hbatmit/ns2.35 commit 482701a ("Patch code with CoDel
#                  patch from http://www.pollere.net/CoDel-ns-2.35.patch", 2013-01-13).
#   sfqCoDel       same repository, queue/sfqcodel.{cc,h} at commit 997532d (2013-03-25,
#                  "Latest version of sfqcodel from CableLabs", one #include commented out).
# Needs: build-essential, tcl-dev (8.6), libotcl1-dev, libtclcl1-dev, tclcl, libpcap0.8-dev, git.
set -eu
BUILD=$1
PIE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$BUILD"
cd "$BUILD"

if [ ! -d ns-2.35 ]; then
	if ! ls ns2_2.35+dfsg.orig.tar.xz >/dev/null 2>&1; then
		apt-get source --download-only ns2 || true
	fi
	tar xf ns2_2.35+dfsg.orig.tar.xz
fi
# HBATMIT_GIT: an existing clone (or bare mirror) of hbatmit/ns2.35, else it is cloned.
R=${HBATMIT_GIT:-$BUILD/hbatmit-ns2.35}
if [ ! -d "$R" ]; then
	git clone -q https://github.com/hbatmit/ns2.35 "$R"
fi
cd ns-2.35

# 1. CoDel: the Pollere patch as applied in hbatmit/ns2.35 482701a (Makefile.in, codel.{cc,h},
#    ns-default.tcl defaults).
if [ ! -f queue/codel.cc ]; then
	git -C "$R" show 482701a -- Makefile.in queue/codel.cc queue/codel.h tcl/lib/ns-default.tcl | patch -p1
fi
# 2. sfqCoDel and PIE sources, plus our stub for the DOCSIS link PIE's DOCSIS mode includes.
git -C "$R" show 997532d:queue/sfqcodel.cc > queue/sfqcodel.cc
git -C "$R" show 997532d:queue/sfqcodel.h > queue/sfqcodel.h
cp "$PIE/pie.cc" "$PIE/pie.h" queue/
cp "$HERE/patch/docsislink.h" queue/docsislink.h
grep -q "queue/sfqcodel.o queue/pie.o" Makefile.in ||
	sed -i 's|^\tapps/pbc.o \\$|\tapps/pbc.o queue/sfqcodel.o queue/pie.o \\|' Makefile.in
# 3. Defaults of the new classes (ours; jk.tcl sets every parameter it relies on anyway).
grep -q "Queue/PIE set a_" tcl/lib/ns-default.tcl ||
	sed -i "/^Queue\/CoDel set target_/r $HERE/patch/ns-default-additions.tcl" tcl/lib/ns-default.tcl
# 4. Debian's libtclcl has no TclObject::bind(int64_t*) (built without HAVE_INT64), which only
#    PackMime's open-loop source (unused here) calls.
sed -i 's|^\tbind("maxpkts_", &maxpkts_);|\t/* aqmlab build: Debian libtclcl has no bind(int64_t*); PackMime is unused */|' packmime/packmime_OL.cc
# 5. Configure-less build: autoconf.h by hand, Makefile by substitution.
cp "$HERE/patch/autoconf.h" autoconf.h
sed -e 's|@V_TCLSH@|/usr/bin/tclsh8.6|g; s|@PERL@|/usr/bin/perl|g' tcl/lib/ns-autoconf.tcl.in > tcl/lib/ns-autoconf.tcl
sed \
 -e 's|@CC@|gcc|; s|@CXX@|g++|; s|@CPP_NAMESPACE@|std|; s|@DEFS@|-DHAVE_CONFIG_H|' \
 -e 's|@DL_LIBS@|-ldl|; s|@INSTALL@|install|; s|@LDFLAGS@||; s|@LIBS@|-ldl|; s|@NSLIB@|libns.so|; s|@PERL@|/usr/bin/perl|' \
 -e 's|@SHLIB_LD@|g++ -shared|; s|@V_CCOPT@|-O2 -g0 -std=gnu++98 -fpermissive -Wno-narrowing -w|; s|@V_DEFINE@|-DNO_TK|; s|@V_DEFINES@|-D__USE_GNU|' \
 -e 's|@V_IMPORT_LIBS@||; s|@V_INCLUDES@|-I/usr/include/tcl8.6 -I/usr/include/tcl8.6/tcl-private/generic -I/usr/include/tcl8.6/tcl-private/unix -I/usr/include/tclcl|; s|@V_INCLUDE_X11@||' \
 -e 's|@V_LIB@|-ltclcl -lotcl -ltcl8.6 -lpcap|; s|@V_LIBS@||; s|@V_LIB_X11@||; s|@V_NS_TCL_LIB_STL@|$(NS_TCL_LIB_STL)|g; s|@V_RANLIB@|ranlib|' \
 -e 's|@V_STATIC@||; s|@V_STLOBJ@|$(OBJ_STL)|; s|@V_TCL2CPP@|tcl2c++|; s|@V_TCLSH@|tclsh8.6|; s|@build_nse@||; s|@libdir@|/usr/lib|; s|@prefix@|/tmp/ns2inst|g' \
 -e 's|^DEFINE\t= |DEFINE\t= -DUSE_INTERP_RESULT -DUSE_INTERP_ERRORLINE |' \
 Makefile.in > Makefile
mkdir -p gen
make -k -j"$(nproc)" ns
echo "built $BUILD/ns-2.35/ns"

# 6. The "pie2013r" variant (README.md, "PIE"): the same PIE code with the two changes that
#    make it behave as the paper reports the 2013 code did, linked as a second binary:
#    calculate_p() discards the departure-rate measurement in progress whenever the queueing
#    delay estimate is below half the target and drop_prob is 0, also while no rate estimate
#    exists yet (the 2014 code's `!missing_init_flag` guard removed), and ends the cycle.
mkdir -p pie2013r
sed -e 's|(edv_.drop_prob == 0) \&\& !missing_init_flag ) {|(edv_.drop_prob == 0) ) { in_measurement = 0;|' \
	queue/pie.cc > pie2013r/pie.cc
grep -q "in_measurement = 0;$" pie2013r/pie.cc
CMD=$(make -n -W queue/pie.cc queue/pie.o | grep "^g++")
eval "$(echo "$CMD" | sed 's| -o queue/pie.o queue/pie.cc| -o pie2013r/pie.o pie2013r/pie.cc|')"
LINK=$(make -n -W common/main-monolithic.cc ns | grep "^g++ .*-o ns ")
eval "$(echo "$LINK" | sed 's|-o ns |-o ns-pie2013r |; s| queue/pie.o | pie2013r/pie.o |')"
echo "built $BUILD/ns-2.35/ns-pie2013r"
