//go:build ignore

// iolat.c: the kernel half of the I/O latency sensor (internal/iolat).
//
// Three BTF tracepoints (tp_btf: no tracefs, no kprobes) follow every block
// request: block_rq_issue stamps it, block_rq_requeue forgets it (it will be
// issued again), block_rq_complete times it and adds it to the aggregate of
// the cgroup it is charged to, its disk and its operation:
//
//   key   = (cgroup, dev, op)
//   cgroup  rq->bio->bi_blkg->blkcg->css.cgroup->kn->id: the kernfs id of the
//           request's blkcg, which is the inode number of the cgroup's
//           directory (the v1 blkio cgroup on a v1 or hybrid host, the v2
//           cgroup on v2); 0 for a request without a bio
//   dev     the whole disk, (major << 20) | first_minor (the kernel's dev_t)
//   op      0 read, 1 write (REQ_OP_WRITE, DISCARD, WRITE_ZEROES and the
//           other odd data-changing operations); flushes and passthrough
//           requests are not counted
//
// Each aggregate counts completed requests, their bytes, the requests issued
// and those retired without a completion (requeued, or issued again with no
// completion seen), so in-flight = issued - completed - retired; the sums of
// the total and the queue time; and a log-linear histogram of the total
// time, 4 buckets per octave.
//
// The total time runs from the request's allocation (rq->start_time_ns,
// which the kernel stamps when the device keeps I/O statistics or has a
// scheduler) or, when it is not stamped, from the issue; to the completion.
// The queue time is the part before the issue (in the scheduler).
//
// Bounded: the aggregates' table has max_entries keys (set by the loader).
// When it is full, a request of a new key is not counted (drops[0]); user
// space deletes keys that stayed idle. A request that finds the table of
// starts full is not timed (drops[1]).
//
// A request served alone is one made (allocated) after the disk's last
// issued request (of the sensor's) had completed, and completed before any
// other was issued: the disk served it unloaded, whatever its cgroup's neighbours were
// doing (held by a cap, or between their requests). Each aggregate keeps a
// second histogram of those (alone), so that user space learns a disk's
// unloaded latency without idling anybody to probe it. A disk's last issue
// and completion times and its issue generation live in devs. Times, not an
// in-flight count: a completion the sensor misses (a few in a thousand, see
// internal/iolat/real_test.go's lost) would leave a count above 0 for good
// and no request alone again; a missed completion here only makes the next
// request look loaded. The price: a request issued when an older request
// is still in flight but a newer one completed first looks alone, unless
// that older one's neighbour issues again before it completes (a streamer
// does, within microseconds of each completion).
//
// events counts every change to an aggregate's request counters (an issue,
// a retirement, a completion), made after the change: user space reads it
// first and skips reading the table when it has not moved, so that an idle
// host's read costs no walk of the table's buckets.
//
// Struct subsets below are relocated by CO-RE against the running kernel's
// BTF: only the fields named here must exist, wherever they are.

typedef unsigned char __u8;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define __always_inline inline __attribute__((always_inline))

#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_F_NO_PREALLOC 1
#define BPF_F_MMAPABLE 1024
#define BPF_ANY 0
#define BPF_NOEXIST 1

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;

#define PRESERVE __attribute__((preserve_access_index))

struct kernfs_node {
	__u64 id;
} PRESERVE;

struct cgroup {
	struct kernfs_node *kn;
	int level;
	struct cgroup *ancestors[];
} PRESERVE;

struct cgroup_subsys_state {
	struct cgroup *cgroup;
} PRESERVE;

struct blkcg {
	struct cgroup_subsys_state css;
} PRESERVE;

struct blkcg_gq {
	struct blkcg *blkcg;
} PRESERVE;

struct gendisk {
	int major;
	int first_minor;
} PRESERVE;

struct block_device {
	struct gendisk *bd_disk;
} PRESERVE;

struct bvec_iter {
	unsigned int bi_size;
} PRESERVE;

struct bio {
	struct block_device *bi_bdev;
	unsigned int bi_opf;
	struct bvec_iter bi_iter;
	struct blkcg_gq *bi_blkg;
} PRESERVE;

struct request_queue {
	struct gendisk *disk;
} PRESERVE;

struct request {
	struct request_queue *q;
	struct bio *bio;
	unsigned int cmd_flags;
	unsigned int __data_len;
	__u64 start_time_ns;
} PRESERVE;

// The histogram: bucket 0 holds everything below 2^MIN_SHIFT ns (1.024 µs);
// bucket 1 + 4*(o - MIN_SHIFT) + s holds [(4+s) << (o-2), (5+s) << (o-2))
// ns for the octave o = floor(log2(ns)) and s its next two bits; the last
// bucket also holds everything from 2^(MIN_SHIFT+OCTAVES) ns (68.7 s) on.
// internal/iolat/hist.go is the same arithmetic.
#define MIN_SHIFT 10
#define OCTAVES 26
#define NUM_BUCKETS (1 + 4 * OCTAVES)
// The histogram's array is a power of two long, so that an index masked
// with HIST_SLOTS - 1 is one the verifier of older kernels (6.1) can see
// is in bounds; the slots from NUM_BUCKETS on stay 0.
#define HIST_SLOTS 128
// The histogram of requests served alone has the same buckets up to
// ALONE_SLOTS - 1, which also holds every time from its lower bound on
// (6 << 23 ns, 50.3 ms): an unloaded small request is far faster.
#define ALONE_SLOTS 64

#define OP_READ 0
#define OP_WRITE 1

struct key {
	__u64 cgroup;
	__u32 dev;
	__u32 op;
};

struct value {
	__u64 count;      // requests completed
	__u64 bytes;      // their bytes
	__u64 issued;     // requests issued
	__u64 retired;    // issued, then requeued or lost (no completion)
	__u64 total_ns;   // sum of the total times
	__u64 queue_ns;   // sum of the queue times
	__u32 hist[HIST_SLOTS];
	__u32 alone[ALONE_SLOTS]; // the requests served alone (see above)
};

struct start {
	__u64 issue_ns;
	__u64 alloc_ns;
	__u64 gen; // the disk's issue generation at this issue
	struct key key;
	__u32 bytes;
	__u32 alone; // 1: the disk's last issued request had completed at its issue
};

// dev_state: one disk's last issue and last completion (ktime ns) of the
// requests the sensor times, and its issue generation (every timed issue
// adds one).
struct dev_state {
	__u64 issue_ns;
	__u64 done_ns;
	__u64 gen;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768); // the loader may set another bound
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct key);
	__type(value, struct value);
} aggregates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); // the request's address
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); // the disk, as in struct key
	__type(value, struct dev_state);
} devs SEC(".maps");

// drops: [0] requests not counted (aggregates full), [1] not timed (starts full).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

// zero: a zeroed value to create aggregates from (too large for the stack).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct value);
} zero SEC(".maps");

__u64 events = 0;

static __always_inline void changed(void)
{
	__sync_fetch_and_add(&events, 1);
}

static __always_inline void drop(__u32 i)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &i);
	if (n)
		*n += 1;
}

static __always_inline __u32 bucket(__u64 ns)
{
	if (ns < (1ULL << MIN_SHIFT))
		return 0;
	__u32 o = 0;
	__u64 v = ns;
	if (v >> 32) {
		v >>= 32;
		o += 32;
	}
	if (v >> 16) {
		v >>= 16;
		o += 16;
	}
	if (v >> 8) {
		v >>= 8;
		o += 8;
	}
	if (v >> 4) {
		v >>= 4;
		o += 4;
	}
	if (v >> 2) {
		v >>= 2;
		o += 2;
	}
	if (v >> 1)
		o += 1;
	if (o >= MIN_SHIFT + OCTAVES)
		return NUM_BUCKETS - 1;
	return 1 + 4 * (o - MIN_SHIFT) + ((ns >> (o - 2)) & 3);
}

// classify returns the key's op for a request's cmd_flags, or -1 when the
// request is not counted.
static __always_inline int classify(unsigned int cmd_flags)
{
	unsigned int op = cmd_flags & 0xff; // REQ_OP_MASK
	if (op == 0)
		return OP_READ;
	if ((op & 1) && op < 32) // op_is_write; 34/35 are driver passthrough
		return OP_WRITE;
	return -1;
}

static __always_inline struct value *aggregate(struct key *k)
{
	struct value *v = bpf_map_lookup_elem(&aggregates, k);
	if (v)
		return v;
	__u32 i = 0;
	struct value *z = bpf_map_lookup_elem(&zero, &i);
	if (!z)
		return 0;
	// EEXIST: another CPU made it meanwhile; E2BIG: the table is full.
	bpf_map_update_elem(&aggregates, k, z, BPF_NOEXIST);
	v = bpf_map_lookup_elem(&aggregates, k);
	if (!v)
		drop(0);
	return v;
}

// dev_of returns the disk's state, made at its first request (0: the table
// is full; its requests are then never alone).
static __always_inline struct dev_state *dev_of(__u32 dev)
{
	struct dev_state *d = bpf_map_lookup_elem(&devs, &dev);
	if (d)
		return d;
	struct dev_state z = {};
	bpf_map_update_elem(&devs, &dev, &z, BPF_NOEXIST);
	return bpf_map_lookup_elem(&devs, &dev);
}

SEC("tp_btf/block_rq_issue")
int on_issue(__u64 *ctx)
{
	struct request *rq = (struct request *)ctx[0];
	int op = classify(rq->cmd_flags);
	if (op < 0)
		return 0;
	struct start s = {};
	s.issue_ns = bpf_ktime_get_ns();
	s.alloc_ns = rq->start_time_ns;
	s.bytes = rq->__data_len;
	s.key.op = op;
	struct gendisk *disk = rq->q->disk;
	if (disk)
		s.key.dev = ((__u32)disk->major << 20) | (__u32)disk->first_minor;
	struct bio *bio = rq->bio;
	if (bio) {
		struct blkcg_gq *blkg = bio->bi_blkg;
		if (blkg)
			s.key.cgroup = blkg->blkcg->css.cgroup->kn->id;
	}
	__u64 id = (__u64)rq;
	struct start *old = bpf_map_lookup_elem(&starts, &id);
	if (old) {
		// Issued before without a completion seen: retire that one.
		struct value *ov = bpf_map_lookup_elem(&aggregates, &old->key);
		if (ov) {
			__sync_fetch_and_add(&ov->retired, 1);
			changed();
		}
		bpf_map_delete_elem(&starts, &id);
	}
	struct value *v = aggregate(&s.key);
	if (!v)
		return 0;
	struct dev_state *d = dev_of(s.key.dev);
	if (d) {
		// Idle since before the request was made: it waited behind
		// nothing, in the scheduler or the driver (its total time runs
		// from its allocation).
		__u64 from = s.alloc_ns && s.alloc_ns <= s.issue_ns ? s.alloc_ns : s.issue_ns;
		s.alone = d->done_ns >= d->issue_ns && d->done_ns <= from;
		s.gen = __sync_fetch_and_add(&d->gen, 1);
		d->issue_ns = s.issue_ns;
	}
	if (bpf_map_update_elem(&starts, &id, &s, BPF_ANY)) {
		drop(1);
		return 0;
	}
	__sync_fetch_and_add(&v->issued, 1);
	changed();
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int on_requeue(__u64 *ctx)
{
	__u64 id = ctx[0];
	struct start *s = bpf_map_lookup_elem(&starts, &id);
	if (!s)
		return 0;
	struct value *v = bpf_map_lookup_elem(&aggregates, &s->key);
	if (v) {
		__sync_fetch_and_add(&v->retired, 1);
		changed();
	}
	bpf_map_delete_elem(&starts, &id);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int on_complete(__u64 *ctx)
{
	__u64 id = ctx[0];
	struct start *s = bpf_map_lookup_elem(&starts, &id);
	if (!s)
		return 0; // not counted, or issued before the sensor was attached
	__u64 now = bpf_ktime_get_ns();
	__u64 issue = s->issue_ns, from = s->alloc_ns;
	__u32 bytes = s->bytes;
	struct key k = s->key;
	// Served alone: the disk idle at its issue, nothing issued since (the
	// generation moved by its own issue only).
	int alone = 0;
	struct dev_state *d = bpf_map_lookup_elem(&devs, &k.dev);
	if (d) {
		alone = s->alone && d->gen == s->gen + 1;
		d->done_ns = now;
	}
	bpf_map_delete_elem(&starts, &id);
	if (from == 0 || from > issue)
		from = issue;
	if (now < issue)
		now = issue;
	__u64 total = now - from;
	struct value *v = bpf_map_lookup_elem(&aggregates, &k);
	if (!v)
		return 0; // deleted by user space meanwhile (idle keys only)
	__u32 b = bucket(total);
	// Hide b's range from the compiler, so that the mask is kept for the
	// verifier (6.1 rejected the bounds check clang moved away from the
	// access).
	asm volatile("" : "+r"(b));
	b &= HIST_SLOTS - 1;
	__sync_fetch_and_add(&v->hist[b], 1);
	if (alone) {
		__u32 a = b < ALONE_SLOTS ? b : ALONE_SLOTS - 1;
		asm volatile("" : "+r"(a));
		a &= ALONE_SLOTS - 1;
		__sync_fetch_and_add(&v->alone[a], 1);
	}
	__sync_fetch_and_add(&v->total_ns, total);
	__sync_fetch_and_add(&v->queue_ns, issue - from);
	__sync_fetch_and_add(&v->bytes, bytes);
	__sync_fetch_and_add(&v->count, 1);
	changed();
	return 0;
}

// The bio counters (bios): the bytes of the bios submitted to a disk, per
// cgroup that user space watches on it, counted where the cgroup byte
// counters count them (block_bio_queue comes right after
// blk_cgroup_bio_start in submit_bio_noacct_nocheck, once per bio: a bio
// held by blk-throttle is counted when it is dispatched). User space adds
// the keys it watches (a cgroup's inode number and a disk); a bio is
// counted to the nearest of its cgroup and that cgroup's ancestors (up to
// MAX_DEPTH levels above it) that is watched on its disk, and to none when
// none is. Its bytes count unless it is a discard, as the cgroup counters'
// read and write bytes do. This is the throttle's fast loop's view
// (internal/actuate): a workload's bytes on its disk, and a parent's bytes
// beyond its watched workloads, without reading a counter file.
//
// bios maps a watched key to its slot in bio_counts, which user space
// chooses and zeroes before it adds the key; bio_counts is an array the
// kernel shares with user space (BPF_F_MMAPABLE), so that reading the
// counters costs no system call and no walk of a hash table's buckets (a
// batch look-up of a 32,768-bucket table walks every bucket whatever the
// number of keys: issue 40).
#define MAX_DEPTH 16
#define REQ_OP_DISCARD 3

struct bio_key {
	__u64 cgroup;
	__u32 dev;
	__u32 pad;
};

struct bio_value {
	__u64 bytes;
	__u64 bios;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768); // as many as bio_counts has slots
	__type(key, struct bio_key);
	__type(value, __u32); // the key's slot in bio_counts
} bios SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32768);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct bio_value);
} bio_counts SEC(".maps");

// bio_keys is how many keys user space watches: with none, a bio costs no
// walk.
__u64 bio_keys = 0;

SEC("tp_btf/block_bio_queue")
int on_bio(__u64 *ctx)
{
	if (bio_keys == 0)
		return 0;
	struct bio *bio = (struct bio *)ctx[0];
	if ((bio->bi_opf & 0xff) == REQ_OP_DISCARD)
		return 0;
	struct block_device *bdev = bio->bi_bdev;
	if (!bdev)
		return 0;
	struct gendisk *disk = bdev->bd_disk;
	if (!disk)
		return 0;
	struct blkcg_gq *blkg = bio->bi_blkg;
	if (!blkg)
		return 0;
	struct cgroup *cg = blkg->blkcg->css.cgroup;
	if (!cg)
		return 0;
	struct bio_key k = {};
	k.dev = ((__u32)disk->major << 20) | (__u32)disk->first_minor;
	__u64 bytes = bio->bi_iter.bi_size;
	int level = cg->level;
	struct cgroup **anc = cg->ancestors;
	for (int i = 0; i < MAX_DEPTH; i++) {
		int at = level - i;
		if (at < 0)
			break;
		struct cgroup *c = 0;
		struct kernfs_node *kn = 0;
		if (bpf_probe_read_kernel(&c, sizeof(c), anc + at) || !c)
			break;
		if (bpf_probe_read_kernel(&kn, sizeof(kn), &c->kn) || !kn)
			break;
		if (bpf_probe_read_kernel(&k.cgroup, sizeof(k.cgroup), &kn->id))
			break;
		__u32 *slot = bpf_map_lookup_elem(&bios, &k);
		if (slot) {
			struct bio_value *v = bpf_map_lookup_elem(&bio_counts, slot);
			if (v) {
				__sync_fetch_and_add(&v->bytes, bytes);
				__sync_fetch_and_add(&v->bios, 1);
			}
			return 0;
		}
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
