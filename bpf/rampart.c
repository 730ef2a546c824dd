//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
// rampart's L4 programs: the XDP filter, sk_lookup steering and the sockops
// connection counter. See README.md for the verdict order and the maps.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define NS 1000000000ULL
#define NO_SOCKET 0xffffffffU
#define DENY_MAX (4U << 20)
#define VLAN_MAX 2 /* 802.1Q / 802.1ad tags parsed */
#define EXTHDR_MAX 2 /* IPv6 extension headers walked */
#define WAYS 4 /* per-source table: 4-way set-associative */
#define VIP_BITS 10
#define VIP_BUCKETS (1 << VIP_BITS) /* per half of the double-buffered VIP tables */
#define VIP_SLOTS 4
#define DCACHE_BITS 16 /* denied-source cache: 1 << 16 entries */
#define XCACHE_BITS 14 /* per-CPU exact IPv6 verdicts in SPLIT /64s: 1 << 14 entries */
#define HASH_MUL 0x9E3779B97F4A7C15ULL

#define F_MALFORMED_VIP_PASS 1
#define F_MALFORMED_OTHER_DROP 2

enum reason {
	R_PASS_NOT_VIP, R_PASS, R_DROP_DENY, R_DROP_PPS, R_DROP_SYN,
	R_DROP_CONN_CAP, R_DROP_NEW_SOURCE, R_PASS_MALFORMED, R_DROP_MALFORMED,
	R_PASS_NO_STATE, R_STEERED, R_STEER_NO_SOCKET, R_CONNTRACK_FULL, R_MAX,
};

struct vip4_key { __u32 addr; __be16 port; __u8 proto; __u8 pad; };
struct vip6_key { __u32 addr[4]; __be16 port; __u8 proto; __u8 pad; };
struct lpm4_key { __u32 prefixlen; __u32 addr; };
struct lpm6_key { __u32 prefixlen; __u32 addr[4]; };

/* Written only by the agent, as a whole. srcs_layout: the rt_srcs entry
 * layout the agent last opened the maps with (Open bumps deny_gen when it
 * changes, so no entry's cached verdicts survive a layout change). */
struct ctl { __u32 cfg_idx, deny_gen, deny4_n, deny6_n, vip_idx, srcs_layout; };

/* XDP's VIP tables: hashed buckets of exact entries, two halves (vip_idx
 * picks the live one). A v4 slot is addr | port << 32 | proto << 48 | 1 << 56.
 * overflow: the bucket did not hold all its VIPs; look in rt_vip4/6. */
struct vipt4 { __u64 slot[VIP_SLOTS]; __u32 overflow, pad; __u64 pad2[3]; }; /* 64 bytes */
struct vip6_slot { __u32 addr[4]; __u32 pp; /* port | proto << 16 | 1 << 24 */ };
struct vipt6 { struct vip6_slot slot[VIP_SLOTS]; __u32 overflow, pad; __u64 pad2[5]; }; /* 128 */

/* Bursts are in nanotokens (tokens * NS); fill = ns to refill from empty. */
struct cfg {
	__u64 pps_rate, pps_burst, pps_fill;
	__u64 syn_rate, syn_burst, syn_fill;
	__u64 new_rate, new_burst, new_fill;
	__u32 max_conns, gen, flags, pad;
	__u64 pad2[5]; /* 128 bytes: a slot is picked with a shift */
};
/* Both limits slots; ctl.cfg_idx picks the live one. */
struct cfgs { struct cfg slot[2]; };

struct bucket { __u64 tokens, ts; };
/* One source; key 0 is a free slot. denied: the deny trie's value for the
 * source's /32 or /64 under deny_gen. xpass: in a SPLIT /64, the last 64 bits
 * of the last address found not denied under deny_gen (0: none), one aligned
 * 64-bit word so no CPU reads it torn. seen: last packet, in 2^16 ns units
 * (wraps in 78 hours; compared wrap-safe, it only picks the way to evict). */
struct src_entry { __u64 key; struct bucket pps, syn; __u64 xpass; __u32 gen, deny_gen, denied, seen; };
struct src_set { struct src_entry e[WAYS]; };
struct dcache { __u64 key; __u32 deny_gen, pad; };
struct xcache { __u64 hi, lo; __u32 deny_gen, denied; };
struct newsrc { struct bucket b; __u32 gen, pad; };

#define PINNED __uint(pinning, LIBBPF_PIN_BY_NAME)

/* The agent's control words and limits. Open loads (or creates) and pins
 * these two maps itself and makes each also back the data section of the
 * same layout below, so XDP reads them as globals: no lookup per packet. */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32);
	 __type(value, struct ctl); __uint(map_flags, BPF_F_MMAPABLE); PINNED; } rt_ctl SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32);
	 __type(value, struct cfgs); __uint(map_flags, BPF_F_MMAPABLE); PINNED; } rt_cfg SEC(".maps");
struct ctl ctl_data SEC(".data.ctl");
struct cfgs cfg_data SEC(".data.cfg");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32);
	 __type(value, __u64); PINNED; } rt_clock SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4096); __type(key, struct vip4_key);
	 __type(value, __u32); PINNED; } rt_vip4 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4096); __type(key, struct vip6_key);
	 __type(value, __u32); PINNED; } rt_vip6 SEC(".maps");

struct deny4_trie { __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, DENY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(struct lpm4_key)); __uint(value_size, 1); };
struct deny6_trie { __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, DENY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(struct lpm6_key)); __uint(value_size, 1); };
struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 1); __type(key, __u32);
	 PINNED; __array(values, struct deny4_trie); } rt_deny4 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 1); __type(key, __u32);
	 PINNED; __array(values, struct deny6_trie); } rt_deny6 SEC(".maps");

/* Written only by the agent: SHA-256 of the deny entries in the live tries
 * and those tries' map ids; zeroed while the tries are being changed. A
 * restarted agent whose list hashes the same adopts the tries as they are. */
struct denyh { __u8 sum[32]; __u32 id4, id6; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32);
	 __type(value, struct denyh); PINNED; } rt_denyh SEC(".maps");

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * VIP_BUCKETS); __type(key, __u32);
	 __type(value, struct vipt4); PINNED; } rt_vipt4 SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2 * VIP_BUCKETS); __type(key, __u32);
	 __type(value, struct vipt6); PINNED; } rt_vipt6 SEC(".maps");
/* Per source (IPv4 /32, IPv6 /64), sets of WAYS; max_entries set at load. */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1 << 18); __type(key, __u32);
	 __type(value, struct src_set); PINNED; } rt_srcs SEC(".maps");
/* Sources without state found denied, so a denied source's next packets
 * skip the trie without taking per-source slots. */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1 << DCACHE_BITS); __type(key, __u32);
	 __type(value, struct dcache); PINNED; } rt_dcache SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32);
	 __type(value, struct newsrc); PINNED; } rt_newsrc SEC(".maps");
/* Established TCP connections to VIPs per source, kept by rampart_sockops. */
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1 << 18); __type(key, __u64);
	 __type(value, __u32); PINNED; } rt_conns SEC(".maps");
/* The same counts summed per bucket of sources (mix(key) >> rt_connsum_shift).
 * A bucket's sum is at least the count of any source in it, so a SYN whose
 * bucket is below the cap passes without the rt_conns lookup (a hash: ~25 ns). */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1 << 18); __type(key, __u32);
	 __type(value, __u32); PINNED; } rt_connsum SEC(".maps");
/* Exact verdicts of IPv6 sources in SPLIT /64s, per CPU (no races), so a
 * repeated source skips the /128 trie walk. */
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1 << XCACHE_BITS); __type(key, __u32);
	 __type(value, struct xcache); PINNED; } rt_xcache SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_SOCKMAP); __uint(max_entries, 64); __type(key, __u32);
	 __type(value, __u64); PINNED; } rt_socks SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, R_MAX); __type(key, __u32);
	 __type(value, __u64); PINNED; } rt_counters SEC(".maps");

/* Load-time constants. rt_test_clock: read the time from rt_clock (tests)
 * instead of jiffies; the verifier prunes the unused branch. rt_jiffy_ns: the
 * tick (CLOCK_MONOTONIC_COARSE's resolution). rt_src_shift: 64 - log2(rt_srcs sets). */
volatile const __u8 rt_test_clock = 0;
volatile const __u64 rt_jiffy_ns = 4000000;
volatile const __u32 rt_src_shift = 64 - 18;
volatile const __u32 rt_connsum_shift = 64 - 18; /* 64 - log2(rt_connsum entries) */

/* A 64-bit load from a pointer that may be only 4-byte aligned (a packet
 * header, a 20-byte VIP slot): without the typedef clang splits it into two
 * 32-bit loads, a shift and an or. x86 loads unaligned words; the verifier
 * checks alignment only where the architecture needs it. */
typedef __u64 __attribute__((aligned(8))) u64_any;
#define LOAD64(p) (*(const u64_any *)(const void *)(p))

/* Multiplicative hash; take the top bits: (mix(x) >> (64 - bits)). */
static __always_inline __u64 mix(__u64 x)
{
	return (x ^ (x >> 32)) * HASH_MUL;
}

static __always_inline void count(__u32 r)
{
	__u64 *c = bpf_map_lookup_elem(&rt_counters, &r);
	if (c)
		*c += 1;
}

/* An XDP verdict: reason r, action a. The XDP path returns verdicts up to
 * rampart_xdp, which counts the reason in one place. */
static __always_inline int done(__u32 r, int a)
{
	return r << 8 | a;
}

static __always_inline __u64 now_ns(void)
{
	if (rt_test_clock) {
		__u32 z = 0;
		__u64 *t = bpf_map_lookup_elem(&rt_clock, &z);
		return t ? *t : 0;
	}
	return bpf_jiffies64() * rt_jiffy_ns; /* bpf_ktime_get_coarse_ns costs ~20 ns more */
}

/* Each control word is read once per packet: the agent may change it meanwhile. */
#define CTL(field) (*(volatile __u32 *)&ctl_data.field)

static __always_inline struct cfg *live_cfg(void)
{
	return &cfg_data.slot[CTL(cfg_idx) & 1];
}

/* Malformed or truncated frame: vip says whether its destination address is
 * known to be a VIP address. */
static __always_inline int malformed(int vip)
{
	__u32 f = live_cfg()->flags;
	int drop = vip ? !(f & F_MALFORMED_VIP_PASS) : !!(f & F_MALFORMED_OTHER_DROP);
	return drop ? done(R_DROP_MALFORMED, XDP_DROP) : done(R_PASS_MALFORMED, XDP_PASS);
}

static __always_inline int vip4_addr(__u32 addr)
{
	struct vip4_key k = { .addr = addr };
	return bpf_map_lookup_elem(&rt_vip4, &k) != 0;
}

static __always_inline int vip6_addr(struct in6_addr *a)
{
	struct vip6_key k = {};
	__builtin_memcpy(k.addr, a, 16);
	return bpf_map_lookup_elem(&rt_vip6, &k) != 0;
}

/* Token bucket with nanotoken arithmetic: exact for any rate and clock step.
 * Tokens never exceed the burst (buckets start full, refills are capped), so
 * a packet in the same tick as the last one only spends. */
static __always_inline int take(struct bucket *b, __u64 now, __u64 rate, __u64 burst, __u64 fill)
{
	__u64 t = b->tokens, el = now - b->ts;
	if (el) {
		b->ts = now;
		if ((__s64)el > 0) /* a clock step back refills nothing */
			t = el >= fill ? burst : t + el * rate;
		if (t > burst)
			t = burst;
	}
	if (t < NS) {
		b->tokens = t;
		return 0;
	}
	b->tokens = t - NS;
	return 1;
}

static __always_inline void reset(struct src_entry *s, struct cfg *c, __u64 now)
{
	s->pps.tokens = c->pps_burst;
	s->pps.ts = now;
	s->syn.tokens = c->syn_burst;
	s->syn.ts = now;
	s->gen = c->gen;
}

/* Deny tries hold value DENY for a denied prefix. The IPv6 trie also holds
 * SPLIT at each /64 that contains longer prefixes but is not denied as a
 * whole, so a lookup with a /64 key gives a verdict for the whole /64
 * (cacheable per source) or says SPLIT: look up the full address each time. */
#define DENY 1
#define SPLIT 2

/* The deny trie's value for the source address at saddr (in the packet),
 * as a /32 (IPv4) or a /plen (IPv6) key. */
static __always_inline int deny_lookup(void *saddr, int v6, __u32 plen)
{
	__u32 z = 0;
	void *trie = bpf_map_lookup_elem(v6 ? (void *)&rt_deny6 : (void *)&rt_deny4, &z);
	if (!trie)
		return 0;
	__u8 *v;
	if (v6) {
		struct lpm6_key k = { .prefixlen = plen };
#pragma unroll
		for (int i = 0; i < 4; i++) /* word loads: the packet may be unaligned, x86 allows it */
			k.addr[i] = ((__u32 *)saddr)[i];
		v = bpf_map_lookup_elem(trie, &k);
	} else {
		struct lpm4_key k = { .prefixlen = 32, .addr = *(__u32 *)saddr };
		v = bpf_map_lookup_elem(trie, &k);
	}
	return v ? *v : 0;
}

/* This CPU's cached exact verdict slot for the IPv6 address hi:lo in a
 * SPLIT /64 (h = mix(hi), already spread; lo is folded in without another
 * multiply: a collision only costs a trie walk). */
static __always_inline struct xcache *xslot(__u64 h, __u64 lo)
{
	__u32 i = ((h >> (64 - XCACHE_BITS)) ^ lo ^ (lo >> 32)) & ((1 << XCACHE_BITS) - 1);
	return bpf_map_lookup_elem(&rt_xcache, &i);
}

static __always_inline int xhit(struct xcache *x, __u64 hi, __u64 lo, __u32 dgen)
{
	return x && x->hi == hi && x->lo == lo && x->deny_gen == dgen;
}

/* The /128 trie walk (~40-60 ns with a large list), remembered in x. */
static __always_inline int xwalk(struct xcache *x, void *saddr, __u64 hi, __u64 lo, __u32 dgen)
{
	int d = deny_lookup(saddr, 1, 128) == DENY;
	if (x) {
		x->hi = hi;
		x->lo = lo;
		x->deny_gen = dgen;
		x->denied = d;
	}
	return d;
}

/* Steps 3-5 for a packet to a VIP:port: deny, per-source buckets, conn cap.
 * key: the source's /32 or /64 key; saddr: its address in the packet; lo:
 * an IPv6 source's last 64 bits. */
static __always_inline int limit(__u64 key, void *saddr, __u64 lo, int v6, int syn)
{
	__u64 h = mix(key);
	__u32 si = h >> rt_src_shift;
	struct src_set *set = bpf_map_lookup_elem(&rt_srcs, &si);
	if (!set)
		return done(R_PASS_NO_STATE, XDP_PASS);
	struct cfg *c = live_cfg();
	__u32 dgen = CTL(deny_gen);
	__u64 now;
	struct src_entry *st = 0;
#pragma unroll
	for (int w = 0; w < WAYS; w++) {
		if (set->e[w].key == key) {
			st = &set->e[w];
			break;
		}
	}

	int deny;
	if (st) {
		if (st->deny_gen != dgen) {
			st->xpass = 0;
			st->denied = deny_lookup(saddr, v6, 64);
			asm volatile("" ::: "memory"); /* the verdicts before their generation */
			st->deny_gen = dgen;
		}
		deny = st->denied;
		if (v6 && deny == SPLIT) {
			if (lo && st->xpass == lo) { /* this source's last address */
				deny = 0;
			} else {
				struct xcache *x = xslot(h, lo);
				deny = xhit(x, key, lo, dgen) ? x->denied : xwalk(x, saddr, key, lo, dgen);
				/* Re-checked: a refresh for a newer list may have run meanwhile. */
				if (!deny && lo && st->deny_gen == dgen)
					st->xpass = lo;
			}
		}
		if (deny)
			return done(R_DROP_DENY, XDP_DROP);
		now = now_ns();
		if (st->gen != c->gen)
			reset(st, c, now);
	} else {
		__u32 di = h >> (64 - DCACHE_BITS);
		struct dcache *d = bpf_map_lookup_elem(&rt_dcache, &di);
		if (d && d->key == key && d->deny_gen == dgen)
			return done(R_DROP_DENY, XDP_DROP);
		struct xcache *x = 0;
		if (v6) { /* an address this CPU already looked up in a SPLIT /64 */
			x = xslot(h, lo);
			if (xhit(x, key, lo, dgen)) {
				if (x->denied)
					return done(R_DROP_DENY, XDP_DROP);
				deny = SPLIT;
				goto admit;
			}
		}
		deny = deny_lookup(saddr, v6, 64);
		if (deny == DENY) {
			if (d) {
				d->deny_gen = dgen;
				d->key = key;
			}
			return done(R_DROP_DENY, XDP_DROP);
		}
		if (v6 && deny == SPLIT && xwalk(x, saddr, key, lo, dgen))
			return done(R_DROP_DENY, XDP_DROP);
admit:
		now = now_ns();
		if (c->new_rate) {
			__u32 z = 0;
			struct newsrc *ns = bpf_map_lookup_elem(&rt_newsrc, &z);
			if (ns) {
				if (ns->gen != c->gen) {
					ns->b.tokens = c->new_burst;
					ns->b.ts = now;
					ns->gen = c->gen;
				}
				if (!take(&ns->b, now, c->new_rate, c->new_burst, c->new_fill))
					return done(R_DROP_NEW_SOURCE, XDP_DROP);
			}
		}
		/* Take a free way, else the one seen longest ago. */
		st = &set->e[0];
#pragma unroll
		for (int w = 1; w < WAYS; w++) {
			if (st->key && (!set->e[w].key || (__s32)(set->e[w].seen - st->seen) < 0))
				st = &set->e[w];
		}
		reset(st, c, now);
		st->xpass = deny == SPLIT ? lo : 0; /* admitted: lo is not denied */
		st->deny_gen = dgen;
		st->denied = deny;
		asm volatile("" ::: "memory"); /* the key goes in last */
		st->key = key;
	}
	st->seen = now >> 16;

	__u32 r = R_PASS;
	if (c->pps_rate && !take(&st->pps, now, c->pps_rate, c->pps_burst, c->pps_fill)) {
		r = R_DROP_PPS;
	} else if (syn) {
		if (c->syn_rate && !take(&st->syn, now, c->syn_rate, c->syn_burst, c->syn_fill)) {
			r = R_DROP_SYN;
		} else if (c->max_conns) {
			__u32 bi = h >> rt_connsum_shift;
			__u32 *sum = bpf_map_lookup_elem(&rt_connsum, &bi);
			if (!sum || *sum >= c->max_conns) {
				__u32 *n = bpf_map_lookup_elem(&rt_conns, &key);
				if (n && *n >= c->max_conns)
					r = R_DROP_CONN_CAP;
			}
		}
	}
	return done(r, r == R_PASS ? XDP_PASS : XDP_DROP);
}

static __always_inline int vip4_match(__u32 addr, __be16 port, __u8 proto)
{
	__u64 k = addr | (__u64)port << 32 | (__u64)proto << 48 | 1ULL << 56;
	__u32 i = (CTL(vip_idx) & 1) * VIP_BUCKETS + (__u32)(mix(k) >> (64 - VIP_BITS));
	struct vipt4 *b = bpf_map_lookup_elem(&rt_vipt4, &i);
	if (!b)
		return 0;
	if (b->slot[0] == k || b->slot[1] == k || b->slot[2] == k || b->slot[3] == k)
		return 1;
	struct vip4_key vk = { .addr = addr, .port = port, .proto = proto };
	return b->overflow && bpf_map_lookup_elem(&rt_vip4, &vk);
}

/* The address as two 64-bit words (hi: the first 8 bytes, little-endian as
 * the tables hold them): two loads and two live registers instead of four. */
static __always_inline int vip6_match(struct in6_addr *a, __be16 port, __u8 proto)
{
	__u64 hi = LOAD64(a), lo = LOAD64((void *)a + 8), x = hi ^ lo;
	__u32 pp = port | (__u32)proto << 16 | 1U << 24;
	__u64 k = (__u32)(x ^ (x >> 32)) | (__u64)pp << 32; /* a0 ^ a1 ^ a2 ^ a3 | pp << 32 */
	__u32 i = (CTL(vip_idx) & 1) * VIP_BUCKETS + (__u32)(mix(k) >> (64 - VIP_BITS));
	struct vipt6 *b = bpf_map_lookup_elem(&rt_vipt6, &i);
	if (!b)
		return 0;
#pragma unroll
	for (int s = 0; s < VIP_SLOTS; s++) {
		struct vip6_slot *e = &b->slot[s];
		if (e->pp == pp && LOAD64(e->addr) == hi && LOAD64(&e->addr[2]) == lo)
			return 1;
	}
	struct vip6_key vk = { .port = port, .proto = proto };
	__builtin_memcpy(vk.addr, a, 16);
	return b->overflow && bpf_map_lookup_elem(&rt_vip6, &vk);
}

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

/* Parses L4 at l4 (bounded by end). Returns L4_OK | syn << 16 | the
 * destination port (network order) for TCP/UDP, 0 for another protocol, -1
 * if malformed. One value, no outputs through pointers: those live on the
 * stack and cost a store and a load each. */
#define L4_OK (1 << 17)
static __always_inline int l4(void *l4, void *end, __u8 proto)
{
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;
		if ((void *)(th + 1) > end || th->doff < 5 || l4 + th->doff * 4 > end)
			return -1;
		__u8 f = ((__u8 *)th)[13];
		if ((f & TCP_SYN) && (f & (TCP_FIN | TCP_RST)))
			return -1;
		return L4_OK | ((f & (TCP_SYN | TCP_ACK)) == TCP_SYN) << 16 | th->dest;
	}
	if (proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;
		if ((void *)(uh + 1) > end || bpf_ntohs(uh->len) < sizeof(*uh))
			return -1;
		return L4_OK | uh->dest;
	}
	return 0;
}

/* be16_len reads a 16-bit big-endian length the verifier can bound. Debian
 * 12's kernels (6.1, 6.12) do not track bounds through a byte swap, so
 * `pointer + bpf_ntohs(len)` is refused there ("math between pkt pointer and
 * register with unbounded min value"); barrier_var hides the swap's range
 * from clang so the mask stays in the code, and the mask bounds it for the
 * verifier (6.18 accepts either form). */
static __always_inline __u32 be16_len(__be16 v)
{
	__u32 n = bpf_ntohs(v);
	barrier_var(n);
	return n & 0xffff;
}

static __always_inline int do_v4(struct iphdr *ip, void *end)
{
	if ((void *)(ip + 1) > end)
		return malformed(0);
	__u32 hl = ip->ihl * 4, tot = be16_len(ip->tot_len);
	if (ip->version != 4 || hl < sizeof(*ip) || tot < hl || (void *)ip + tot > end)
		return malformed(vip4_addr(ip->daddr));
	if (ip->frag_off & bpf_htons(0x3fff)) /* MF or offset: no usable L4 */
		return vip4_addr(ip->daddr) ? malformed(1) : done(R_PASS_NOT_VIP, XDP_PASS);
	int rc = l4((void *)ip + hl, end, ip->protocol);
	if (rc == 0)
		return done(R_PASS_NOT_VIP, XDP_PASS);
	if (rc < 0)
		return malformed(vip4_addr(ip->daddr));
	if (!vip4_match(ip->daddr, rc & 0xffff, ip->protocol))
		return done(R_PASS_NOT_VIP, XDP_PASS);
	return limit(0xffULL | ((__u64)ip->saddr << 32), &ip->saddr, 0, 0, (rc >> 16) & 1);
}

static __always_inline int ext_hdr(__u8 nh)
{
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS;
}

static __always_inline int do_v6(struct ipv6hdr *ip6, void *end)
{
	if ((void *)(ip6 + 1) > end)
		return malformed(0);
	void *p = ip6 + 1;
	if (ip6->version != 6 || p + be16_len(ip6->payload_len) > end)
		return malformed(vip6_addr(&ip6->daddr));
	__u8 nh = ip6->nexthdr;
	if (nh != IPPROTO_TCP && nh != IPPROTO_UDP) { /* not the common case */
#pragma unroll
		for (int i = 0; i < EXTHDR_MAX; i++) {
			if (!ext_hdr(nh))
				break;
			struct ipv6_opt_hdr *o = p;
			if ((void *)(o + 1) > end)
				return malformed(vip6_addr(&ip6->daddr));
			nh = o->nexthdr;
			p += (o->hdrlen + 1) * 8;
		}
		if (nh == IPPROTO_FRAGMENT)
			return vip6_addr(&ip6->daddr) ? malformed(1) : done(R_PASS_NOT_VIP, XDP_PASS);
		if (ext_hdr(nh)) /* more extension headers than EXTHDR_MAX */
			return malformed(vip6_addr(&ip6->daddr));
	}
	int rc = l4(p, end, nh);
	if (rc == 0)
		return done(R_PASS_NOT_VIP, XDP_PASS);
	if (rc < 0)
		return malformed(vip6_addr(&ip6->daddr));
	if (!vip6_match(&ip6->daddr, rc & 0xffff, nh))
		return done(R_PASS_NOT_VIP, XDP_PASS);
	/* The /64 key and the last 64 bits, one load each (x86 loads unaligned). */
	__u64 key = LOAD64(&ip6->saddr), lo = LOAD64((void *)&ip6->saddr + 8);
	/* Multicast (ff00::/8) or ::/64 sources are never valid on the wire; they
	 * would also collide with IPv4 keys or the free-slot key 0. */
	if ((key & 0xff) == 0xff || key == 0)
		return malformed(1);
	return limit(key, &ip6->saddr, lo, 1, (rc >> 16) & 1);
}

struct vlan_hdr { __be16 tci; __be16 proto; };

static __always_inline int xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return malformed(0);
	void *p = eth + 1;
	__be16 proto = *(__be16 *)(data + 12); /* one load (struct ethhdr is packed: two) */
#pragma unroll
	for (int i = 0; i < VLAN_MAX; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		struct vlan_hdr *v = p;
		if ((void *)(v + 1) > end)
			return malformed(0);
		proto = v->proto;
		p = v + 1;
	}
	if (proto == bpf_htons(ETH_P_IP))
		return do_v4(p, end);
	if (proto == bpf_htons(ETH_P_IPV6))
		return do_v6(p, end);
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD))
		return malformed(0); /* more tags than VLAN_MAX */
	return done(R_PASS_NOT_VIP, XDP_PASS);
}

SEC("xdp")
int rampart_xdp(struct xdp_md *ctx)
{
	int v = xdp(ctx);
	count(v >> 8);
	return v & 0xff;
}

/* Steers new TCP connections and UDP datagrams for a VIP:port to the
 * registered proxy socket; anything else takes the kernel's usual lookup. */
SEC("sk_lookup")
int rampart_sk_lookup(struct bpf_sk_lookup *ctx)
{
	__u32 *idx = 0;
	__be16 port = bpf_htons(ctx->local_port);
	if (ctx->family == 2 /* AF_INET */) {
		struct vip4_key k = { .addr = ctx->local_ip4, .port = port, .proto = ctx->protocol };
		idx = bpf_map_lookup_elem(&rt_vip4, &k);
	} else if (ctx->family == 10 /* AF_INET6 */) {
		struct vip6_key k = { .port = port, .proto = ctx->protocol };
		k.addr[0] = ctx->local_ip6[0];
		k.addr[1] = ctx->local_ip6[1];
		k.addr[2] = ctx->local_ip6[2];
		k.addr[3] = ctx->local_ip6[3];
		idx = bpf_map_lookup_elem(&rt_vip6, &k);
	}
	if (!idx || *idx == NO_SOCKET)
		return SK_PASS;
	struct bpf_sock *sk = bpf_map_lookup_elem(&rt_socks, idx);
	if (!sk) {
		count(R_STEER_NO_SOCKET);
		return SK_PASS;
	}
	long err = bpf_sk_assign(ctx, sk, 0);
	bpf_sk_release(sk);
	count(err ? R_STEER_NO_SOCKET : R_STEERED);
	return SK_PASS;
}

/* barrier_var keeps clang from merging the two ctx loads into one load
 * through a computed pointer, which the verifier rejects. */
static __always_inline __u64 ops_src(struct bpf_sock_ops *ops)
{
	__u32 lo, hi;
	if (ops->family == 2) {
		lo = 0xff;
		hi = ops->remote_ip4;
		barrier_var(hi);
	} else {
		lo = ops->remote_ip6[0];
		hi = ops->remote_ip6[1];
		barrier_var(hi);
	}
	return (__u64)lo | ((__u64)hi << 32);
}

static __always_inline int ops_vip(struct bpf_sock_ops *ops)
{
	__be16 port = bpf_htons(ops->local_port);
	if (ops->family == 2) {
		struct vip4_key k = { .addr = ops->local_ip4, .port = port, .proto = IPPROTO_TCP };
		return bpf_map_lookup_elem(&rt_vip4, &k) != 0;
	}
	struct vip6_key k = { .port = port, .proto = IPPROTO_TCP };
	k.addr[0] = ops->local_ip6[0];
	k.addr[1] = ops->local_ip6[1];
	k.addr[2] = ops->local_ip6[2];
	k.addr[3] = ops->local_ip6[3];
	return bpf_map_lookup_elem(&rt_vip6, &k) != 0;
}

/* Counts established TCP connections to VIPs per source: +1 when a passive
 * connection is established, -1 when that socket reaches TCP_CLOSE. */
static __always_inline __u32 *conn_sum(__u64 key)
{
	__u32 i = mix(key) >> rt_connsum_shift;
	return bpf_map_lookup_elem(&rt_connsum, &i);
}

SEC("sockops")
int rampart_sockops(struct bpf_sock_ops *ops)
{
	__u64 key;
	__u32 *n, *sum;
	if (ops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		if ((ops->family != 2 && ops->family != 10) || !ops_vip(ops))
			return 1;
		key = ops_src(ops);
		sum = conn_sum(key);
		if (sum)
			__sync_fetch_and_add(sum, 1); /* before the count: sum >= count throughout */
		n = bpf_map_lookup_elem(&rt_conns, &key);
		if (n) {
			__sync_fetch_and_add(n, 1);
		} else {
			__u32 one = 1;
			if (bpf_map_update_elem(&rt_conns, &key, &one, BPF_NOEXIST)) {
				n = bpf_map_lookup_elem(&rt_conns, &key);
				if (!n) {
					if (sum)
						__sync_fetch_and_sub(sum, 1);
					count(R_CONNTRACK_FULL);
					return 1;
				}
				__sync_fetch_and_add(n, 1);
			}
		}
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
	} else if (ops->op == BPF_SOCK_OPS_STATE_CB && ops->args[1] == BPF_TCP_CLOSE &&
		   ops->args[0] != BPF_TCP_CLOSE) {
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_STATE_CB_FLAG);
		key = ops_src(ops);
		n = bpf_map_lookup_elem(&rt_conns, &key);
		if (!n)
			return 1;
		__u32 old = *n;
		for (int i = 0; i < 4 && old > 0; i++) {
			__u32 prev = __sync_val_compare_and_swap(n, old, old - 1);
			if (prev == old) {
				if (old == 1)
					bpf_map_delete_elem(&rt_conns, &key);
				sum = conn_sum(key); /* after the count */
				if (sum)
					__sync_fetch_and_sub(sum, 1);
				break;
			}
			old = prev;
		}
	}
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
