/* hand-written for a configure-less build on Debian 12 (aqmlab tools/ns2/build-patched-ns2.sh; ns-2.35 autoconf.h.in filled in for Debian 12 amd64) */
#define NSPERL_PATH "/usr/bin/perl"
#define NSTCLSH_PATH "/usr/bin/tclsh8.6"
#define RANDOM_RETURN_TYPE long
/* HAVE_INT64 left undefined: Debian libtclcl has no bind(int64_t*) */
#define SIZEOF_LONG 8
#define HAVE_SOCKLEN_T 1
#define HAVE_BCOPY 1
#define HAVE_BZERO 1
#define HAVE_GETRUSAGE 1
#define HAVE_SBRK 1
#define HAVE_SNPRINTF 1
#define HAVE_STRTOLL 1
#define HAVE_STRTOQ 1
#define HAVE_FEENABLEEXCEPT 1
#define STDC_HEADERS 1
#define HAVE_STRING_H 1
#define HAVE_STRINGS_H 1
#define HAVE_ARPA_INET_H 1
#define HAVE_NETINET_IN_H 1
#define HAVE_NET_ETHERNET_H 1
#define HAVE_FENV_H 1
#ifdef __cplusplus
#define HAVE_STL 1
#define CPP_REQUIRES_NAMESPACE 1
#ifdef CPP_REQUIRES_NAMESPACE
#ifndef CPP_NAMESPACE
#define CPP_NAMESPACE std
#endif
using namespace CPP_NAMESPACE;
#endif
#endif
