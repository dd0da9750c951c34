// gpualloc-bench-graph: a dynamic-graph workload in the manner of faimGraph /
// the survey benchmark's graph test, as unmodified CUDA.
//
// Every vertex owns an adjacency array obtained with device malloc. The graph
// is generated (R-MAT, so degrees are skewed), built on the GPU (one malloc
// per vertex with edges), then `rounds` times a batch of random new edges is
// inserted (arrays that overflow are reallocated at the next power of two:
// malloc, copy, free) and a batch of random existing edges is deleted (arrays
// that fall to a quarter are shrunk the same way; empty ones are freed).
//
//   gpualloc-bench-graph --test graph --params vertices=V,edges=E,batch=B,rounds=R[,seed=S]
//
// Correctness: the host keeps its own copy of the graph; after the build and
// every batch a kernel compares each vertex's degree and a hash-sum of its
// neighbours with the host's. Corrupted or overlapping arrays show up there.
// A NULL from malloc is counted and leaves the vertex without its update,
// which the check then reports as well.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common.h"

namespace {

constexpr int kBlock = 256;
constexpr unsigned kMinCap = 4;

struct vertex {
  unsigned* adj;
  unsigned deg;
  unsigned cap;
};

__host__ __device__ inline unsigned long long mix64(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

__host__ __device__ inline unsigned next_cap(unsigned need) {
  unsigned c = kMinCap;
  while (c < need) c *= 2;
  return c;
}

__device__ inline unsigned long long tid() { return blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; }

// Build: vertex v gets the edges csr[off[v] .. off[v+1]).
__global__ void k_build(vertex* g, const unsigned* off, const unsigned* csr, unsigned nv, unsigned long long* nulls) {
  unsigned long long v = tid();
  if (v >= nv) return;
  unsigned deg = off[v + 1] - off[v];
  vertex x{nullptr, 0, 0};
  if (deg) {
    unsigned cap = next_cap(deg);
    x.adj = static_cast<unsigned*>(malloc(cap * sizeof(unsigned)));
    if (x.adj) {
      for (unsigned i = 0; i < deg; ++i) x.adj[i] = csr[off[v] + i];
      x.deg = deg;
      x.cap = cap;
    } else {
      atomicAdd(nulls, 1ull);
    }
  }
  g[v] = x;
}

// A batch grouped by source vertex: segment s touches vertex seg_v[s] with the
// destinations dst[seg_off[s] .. seg_off[s+1]).
__global__ void k_insert(vertex* g, const unsigned* seg_v, const unsigned* seg_off, const unsigned* dst, unsigned nseg,
                         unsigned long long* nulls) {
  unsigned long long s = tid();
  if (s >= nseg) return;
  vertex& x = g[seg_v[s]];
  unsigned b = seg_off[s], k = seg_off[s + 1] - b;
  unsigned need = x.deg + k;
  if (need > x.cap) {
    unsigned cap = next_cap(need);
    unsigned* a = static_cast<unsigned*>(malloc(cap * sizeof(unsigned)));
    if (!a) {
      atomicAdd(nulls, 1ull);
      return;
    }
    for (unsigned i = 0; i < x.deg; ++i) a[i] = x.adj[i];
    free(x.adj);
    x.adj = a;
    x.cap = cap;
  }
  for (unsigned i = 0; i < k; ++i) x.adj[x.deg + i] = dst[b + i];
  x.deg = need;
}

__global__ void k_delete(vertex* g, const unsigned* seg_v, const unsigned* seg_off, const unsigned* dst, unsigned nseg,
                         unsigned long long* nulls) {
  unsigned long long s = tid();
  if (s >= nseg) return;
  vertex& x = g[seg_v[s]];
  unsigned deg = x.deg;
  unsigned* a = x.adj;
  for (unsigned j = seg_off[s]; j < seg_off[s + 1]; ++j) {
    unsigned d = dst[j];
    for (unsigned i = 0; i < deg; ++i)
      if (a[i] == d) {
        a[i] = a[--deg];
        break;
      }
  }
  x.deg = deg;
  if (deg == 0) {
    free(a);
    x.adj = nullptr;
    x.cap = 0;
  } else if (x.cap > kMinCap && deg <= x.cap / 4) {
    unsigned cap = next_cap(2 * deg);
    unsigned* n = static_cast<unsigned*>(malloc(cap * sizeof(unsigned)));
    if (!n) {
      atomicAdd(nulls, 1ull);  // keeps the old, larger array: still correct
      return;
    }
    for (unsigned i = 0; i < deg; ++i) n[i] = a[i];
    free(a);
    x.adj = n;
    x.cap = cap;
  }
}

__global__ void k_free_all(vertex* g, unsigned nv) {
  unsigned long long v = tid();
  if (v >= nv) return;
  free(g[v].adj);
  g[v] = vertex{nullptr, 0, 0};
}

struct check_out {
  unsigned long long wrong_deg, wrong_sum, misaligned, over_cap;
};

__global__ void k_check(const vertex* g, const unsigned* want_deg, const unsigned long long* want_sum, unsigned nv,
                        check_out* out) {
  unsigned long long v = tid();
  if (v >= nv) return;
  vertex x = g[v];
  if (x.deg != want_deg[v]) atomicAdd(&out->wrong_deg, 1ull);
  if (x.deg > x.cap) atomicAdd(&out->over_cap, 1ull);
  if (reinterpret_cast<unsigned long long>(x.adj) & 15) atomicAdd(&out->misaligned, 1ull);
  unsigned long long s = 0;
  for (unsigned i = 0; i < x.deg && i < x.cap; ++i) s += mix64(x.adj[i]);
  if (s != want_sum[v]) atomicAdd(&out->wrong_sum, 1ull);
}

// ---- host --------------------------------------------------------------------

struct rmat {
  std::mt19937_64 rng;
  unsigned scale;
  double a = 0.45, b = 0.15, c = 0.15;  // milder than Graph500's 0.57/0.19/0.19
  rmat(unsigned long long seed, unsigned s) : rng(seed), scale(s) {}
  std::pair<unsigned, unsigned> edge() {
    std::uniform_real_distribution<double> u(0, 1);
    unsigned s = 0, d = 0;
    for (unsigned l = 0; l < scale; ++l) {
      double r = u(rng);
      s <<= 1;
      d <<= 1;
      if (r < a) {
      } else if (r < a + b) {
        d |= 1;
      } else if (r < a + b + c) {
        s |= 1;
      } else {
        s |= 1;
        d |= 1;
      }
    }
    // Scramble ids so that hubs do not cluster at low numbers.
    unsigned mask = (1u << scale) - 1;
    return {static_cast<unsigned>(mix64(s) & mask), static_cast<unsigned>(mix64(d + 7) & mask)};
  }
};

template <class T>
struct dvec {
  T* p = nullptr;
  size_t cap = 0;
  void put(const std::vector<T>& v) {
    if (v.size() > cap) {
      if (p) cudaFree(p);
      cap = std::max<size_t>(v.size(), 1);
      BENCH_CUDA(cudaMalloc(&p, cap * sizeof(T)));
    }
    if (!v.empty()) BENCH_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~dvec() {
    if (p) cudaFree(p);
  }
};

struct batch_dev {
  dvec<unsigned> seg_v, seg_off, dst;
  unsigned nseg = 0;
  // Groups edges by source and uploads them.
  void load(std::vector<std::pair<unsigned, unsigned>> e) {
    std::sort(e.begin(), e.end());
    std::vector<unsigned> sv, so, d;
    d.reserve(e.size());
    for (size_t i = 0; i < e.size(); ++i) {
      if (i == 0 || e[i].first != e[i - 1].first) {
        sv.push_back(e[i].first);
        so.push_back(static_cast<unsigned>(i));
      }
      d.push_back(e[i].second);
    }
    so.push_back(static_cast<unsigned>(e.size()));
    nseg = static_cast<unsigned>(sv.size());
    seg_v.put(sv);
    seg_off.put(so);
    dst.put(d);
  }
};

unsigned grid(unsigned long long n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

}  // namespace

int main(int argc, char** argv) {
  bench::args a{argc, argv};
  if (a.flag("--help") || a.flag("-h")) {
    std::printf("usage: gpualloc-bench-graph --test graph --params vertices=V,edges=E,batch=B,rounds=R[,seed=S]\n"
                "Prints ROW,%s lines. Normally run by bench/gpualloc-bench.\n",
                bench::kRowHeader);
    return 0;
  }
  unsigned long long V = 1 << 19, E = 1 << 21, B = 1 << 18, R = 4, seed = 1;
  for (const std::string& kv : bench::split(a.get("--params", ""), ',')) {
    auto p = bench::split(kv, '=');
    if (p.size() != 2) bench::fatal("bad --params entry '%s'", kv.c_str());
    unsigned long long v = std::strtoull(p[1].c_str(), nullptr, 0);
    if (p[0] == "vertices") V = v;
    else if (p[0] == "edges") E = v;
    else if (p[0] == "batch") B = v;
    else if (p[0] == "rounds") R = v;
    else if (p[0] == "seed") seed = v;
    else bench::fatal("unknown --params key '%s'", p[0].c_str());
  }
  unsigned scale = 0;
  while ((1ull << scale) < V) ++scale;
  V = 1ull << scale;
  const std::string mode = a.get("--mode", "warm");

  BENCH_CUDA(cudaFree(nullptr));
  bench::host_api api = bench::host_api::find();
  bench::print_info(api);
  char point[160];
  std::snprintf(point, sizeof point, "vertices=%llu,edges=%llu,batch=%llu,rounds=%llu", V, E, B, R);
  bench::begin_point(point);

  // Host model: the edge list (for picking deletions) and per-vertex signatures.
  rmat gen(seed, scale);
  std::vector<std::pair<unsigned, unsigned>> edges(E);
  for (auto& e : edges) e = gen.edge();
  std::vector<unsigned> want_deg(V, 0);
  std::vector<unsigned long long> want_sum(V, 0);
  for (auto& e : edges) {
    ++want_deg[e.first];
    want_sum[e.first] += mix64(e.second);
  }
  std::vector<unsigned> off(V + 1, 0), csr(E);
  for (unsigned long long v = 0; v < V; ++v) off[v + 1] = off[v] + want_deg[v];
  {
    std::vector<unsigned> fill(off.begin(), off.end() - 1);
    for (auto& e : edges) csr[fill[e.first]++] = e.second;
  }
  unsigned max_deg = *std::max_element(want_deg.begin(), want_deg.end());

  vertex* g = nullptr;
  BENCH_CUDA(cudaMalloc(&g, V * sizeof(vertex)));
  dvec<unsigned> d_off, d_csr, d_want_deg;
  dvec<unsigned long long> d_want_sum;
  d_off.put(off);
  d_csr.put(csr);
  unsigned long long* nulls = nullptr;
  check_out* chk = nullptr;
  BENCH_CUDA(cudaMalloc(&nulls, sizeof(unsigned long long)));
  BENCH_CUDA(cudaMalloc(&chk, sizeof(check_out)));
  BENCH_CUDA(cudaMemset(nulls, 0, sizeof(unsigned long long)));

  // Warm the module (and the heap set-up) before timing.
  {
    vertex* one = nullptr;
    BENCH_CUDA(cudaMalloc(&one, sizeof(vertex)));
    k_free_all<<<1, 1>>>(one, 0);
    BENCH_CUDA(cudaDeviceSynchronize());
    cudaFree(one);
  }

  unsigned long long fails = 0;
  std::string first_problem;
  auto verify = [&](const char* when) {
    d_want_deg.put(want_deg);
    d_want_sum.put(want_sum);
    BENCH_CUDA(cudaMemset(chk, 0, sizeof(check_out)));
    k_check<<<grid(V), kBlock>>>(g, d_want_deg.p, d_want_sum.p, static_cast<unsigned>(V), chk);
    check_out h{};
    BENCH_CUDA(cudaMemcpy(&h, chk, sizeof h, cudaMemcpyDeviceToHost));
    unsigned long long hn = 0;
    BENCH_CUDA(cudaMemcpy(&hn, nulls, sizeof hn, cudaMemcpyDeviceToHost));
    if (h.wrong_deg || h.wrong_sum || h.misaligned || h.over_cap || hn) {
      ++fails;
      if (first_problem.empty()) {
        char b[256];
        std::snprintf(b, sizeof b, "after %s: wrong_deg=%llu wrong_sum=%llu misaligned=%llu over_cap=%llu nulls=%llu",
                      when, h.wrong_deg, h.wrong_sum, h.misaligned, h.over_cap, hn);
        first_problem = b;
      }
    }
  };

  bench::event_timer ev;
  ev.start();
  k_build<<<grid(V), kBlock>>>(g, d_off.p, d_csr.p, static_cast<unsigned>(V), nulls);
  double t_build = ev.stop();
  verify("build");

  std::mt19937_64 pick(seed * 7 + 3);
  batch_dev bd;
  std::vector<double> t_ins, t_del;
  for (unsigned long long r = 0; r < R; ++r) {
    std::vector<std::pair<unsigned, unsigned>> ins(B);
    for (auto& e : ins) {
      e = gen.edge();
      ++want_deg[e.first];
      want_sum[e.first] += mix64(e.second);
      edges.push_back(e);
      max_deg = std::max(max_deg, want_deg[e.first]);
    }
    bd.load(ins);
    ev.start();
    k_insert<<<grid(bd.nseg), kBlock>>>(g, bd.seg_v.p, bd.seg_off.p, bd.dst.p, bd.nseg, nulls);
    t_ins.push_back(ev.stop());
    verify("insert");

    std::vector<std::pair<unsigned, unsigned>> del;
    unsigned long long nd = std::min<unsigned long long>(B, edges.size());
    del.reserve(nd);
    for (unsigned long long i = 0; i < nd; ++i) {
      size_t j = std::uniform_int_distribution<size_t>(0, edges.size() - 1)(pick);
      auto e = edges[j];
      edges[j] = edges.back();
      edges.pop_back();
      --want_deg[e.first];
      want_sum[e.first] -= mix64(e.second);
      del.push_back(e);
    }
    bd.load(del);
    ev.start();
    k_delete<<<grid(bd.nseg), kBlock>>>(g, bd.seg_v.p, bd.seg_off.p, bd.dst.p, bd.nseg, nulls);
    t_del.push_back(ev.stop());
    verify("delete");
  }
  ev.start();
  k_free_all<<<grid(V), kBlock>>>(g, static_cast<unsigned>(V));
  double t_free = ev.stop();

  char note[512];
  std::snprintf(note, sizeof note, "vertices=%llu edges=%llu batch=%llu rounds=%llu max_degree=%u%s%s", V, E, B, R,
                max_deg, first_problem.empty() ? "" : " ", first_problem.c_str());
  auto out = [&](const char* phase, const std::vector<double>& t) {
    bench::row r;
    r.test = "graph";
    r.mode = mode;
    r.phase = phase;
    r.size = 0;
    r.threads = V;
    r.iters = R;
    r.s = bench::summarize(t);
    r.failures = static_cast<int>(fails);
    r.note = note;
    bench::emit(r);
  };
  out("build", {t_build});
  out("insert", t_ins);
  out("delete", t_del);
  out("free_all", {t_free});
  cudaFree(g);
  cudaFree(nulls);
  cudaFree(chk);
  std::printf("DONE\n");
  return 0;
}
