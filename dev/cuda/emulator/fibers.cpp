// The emulator's scheduler: one fiber per CUDA thread, blocks run in order (see cuda_emu.h).
#include "cuda_emu.h"
#include <map>
#include <string>
#include <vector>

extern "C" void emu_switch(void** save_sp, void* next_sp);
asm(R"(
.text
.globl emu_switch
.hidden emu_switch
.type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
)");

namespace emu {
struct Fiber {
  void* sp;
  Dim tid;
  unsigned linear;
  bool done;
  bool waiting;
};
struct Warp {
  unsigned gen = 0, arrived = 0, live = 0;
  unsigned char slots[32][16];
};

Fiber* cur;
Dim grid_dim, block_dim, block_idx;
unsigned char* dyn_smem;

static void* sched_sp;
static std::vector<Fiber> fibers;
static std::vector<Warp> warps;
static std::vector<char*> stacks;
static unsigned block_gen, block_arrived, live;
static unsigned long epoch;
static void (*body)(void**);
static void** body_args;
static const size_t kStack = 128 * 1024;

Dim& thread_idx() { return cur->tid; }
unsigned lane_id() { return cur->linear & 31; }

static void wait_yield() {
  cur->waiting = true;
  emu_switch(&cur->sp, sched_sp);
}

void sync_block() {
  unsigned gen = block_gen;
  if (++block_arrived == live) { block_arrived = 0; block_gen++; epoch++; return; }
  while (block_gen == gen) wait_yield();
}

void sync_warp() {
  Warp& w = warps[cur->linear / 32];
  unsigned gen = w.gen;
  if (++w.arrived == w.live) { w.arrived = 0; w.gen++; epoch++; return; }
  while (w.gen == gen) wait_yield();
}

void exchange(const void* mine, void* out, int bytes) {
  Warp& w = warps[cur->linear / 32];
  if (w.live != 32) { fprintf(stderr, "emu: warp shuffle with %u live lanes\n", w.live); abort(); }
  memcpy(w.slots[cur->linear & 31], mine, bytes);
  sync_warp();
  for (int i = 0; i < 32; i++) memcpy((char*)out + i * bytes, w.slots[i], bytes);
  sync_warp();
}

static void trampoline() {
  body(body_args);
  cur->done = true;
  live--;
  Warp& w = warps[cur->linear / 32];
  w.live--;
  if (w.arrived && w.arrived == w.live) { w.arrived = 0; w.gen++; }
  if (block_arrived && block_arrived == live) { block_arrived = 0; block_gen++; }
  epoch++;
  emu_switch(&cur->sp, sched_sp);
  abort();  // a finished fiber is never resumed
}

static void run_block(unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    Fiber& f = fibers[i];
    void** sp = (void**)(((uintptr_t)(stacks[i] + kStack)) & ~(uintptr_t)15);
    *--sp = nullptr;                      // alignment slot: the trampoline never returns
    *--sp = (void*)&trampoline;
    for (int r = 0; r < 6; r++) *--sp = nullptr;
    f.sp = sp;
    f.done = false;
    f.linear = i;
    f.tid = {i % block_dim.x, (i / block_dim.x) % block_dim.y, i / (block_dim.x * block_dim.y)};
  }
  for (unsigned w = 0; w < warps.size(); w++) {
    warps[w].gen = warps[w].arrived = 0;
    warps[w].live = std::min(32u, n - 32 * w);
  }
  block_gen = block_arrived = 0;
  live = n;
  while (live) {
    unsigned long before = epoch;
    bool all_waiting = true;
    for (unsigned i = 0; i < n; i++) {
      if (fibers[i].done) continue;
      cur = &fibers[i];
      cur->waiting = false;
      emu_switch(&sched_sp, cur->sp);
      if (!fibers[i].done && !fibers[i].waiting) all_waiting = false;
    }
    if (live && all_waiting && epoch == before) {
      fprintf(stderr, "emu: deadlock in block (%u,%u,%u): a barrier not reached by every thread\n",
              block_idx.x, block_idx.y, block_idx.z);
      abort();
    }
  }
}

static std::map<std::string, void (*)(void**)>& registry() {
  static std::map<std::string, void (*)(void**)> r;
  return r;
}

int register_kernel(const char* name, void (*fn)(void**)) {
  registry()[name] = fn;
  return 0;
}
}  // namespace emu

extern "C" int emu_launch(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, size_t smem, void** args) {
  using namespace emu;
  auto it = registry().find(name);
  if (it == registry().end()) return 1;
  unsigned n = bx * by * bz;
  if (n == 0 || n > 1024) return 2;
  if (fibers.size() < n) fibers.resize(n);
  while (stacks.size() < n) stacks.push_back((char*)aligned_alloc(64, kStack));
  warps.assign((n + 31) / 32, Warp());
  // a guard of 4 KiB past the dynamic shared memory the launch asked for: a kernel that writes
  // beyond it (a size linear.py got wrong) aborts here instead of corrupting the heap unseen
  const size_t guard = 4096;
  std::vector<unsigned char> smem_buf(smem + guard);
  dyn_smem = smem_buf.data();
  memset(dyn_smem + smem, 0xFF, guard);
  grid_dim = {gx, gy, gz};
  block_dim = {bx, by, bz};
  body = it->second;
  body_args = args;
  for (unsigned z = 0; z < gz; z++)
    for (unsigned y = 0; y < gy; y++)
      for (unsigned x = 0; x < gx; x++) {
        block_idx = {x, y, z};
        memset(dyn_smem, 0xA5, smem);     // poison: shared memory starts undefined
        run_block(n);
        for (size_t i = 0; i < guard; i++)
          if (dyn_smem[smem + i] != 0xFF) {
            fprintf(stderr, "emu: %s wrote shared memory at +%zu past its %zu dynamic bytes\n", name, i, smem);
            abort();
          }
      }
  return 0;
}
