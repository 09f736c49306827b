/* Stub written for aqmlab's patched-ns-2 build (NOT CableLabs code): the 2013-14 PIE ns-2
 * code includes docsislink.h for its DOCSIS mode, which the Jarvinen & Kojo scenario never
 * enables (PIE switches to it only when told "link" of class DocsisLink). */
#ifndef aqmlab_docsislink_stub_h
#define aqmlab_docsislink_stub_h
#include "delay.h"
class DocsisLink : public LinkDelay {
public:
	double expectedDelay(int) { return 0.0; }
};
#endif
