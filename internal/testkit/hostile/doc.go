// Package hostile holds the unauthenticated clients the receiver must
// survive (slow bodies, big bodies, big headers, idle keep-alive
// connections, an unsigned flood) and the legit client whose service they
// must not spoil. The daemon tests run them small against the real
// receiver binary; `hookbench attack` (bench/, run by scripts/attack.sh)
// runs them at full size. Every loop is bounded by a count and by its
// context, and every connection goes to the target given, which callers
// keep on loopback.
package hostile
