// svc's Node-API binding of hnswlib's HNSW graph (hnswlib::HierarchicalNSW<float>, header-only,
// taken from the hnswlib-node package's copy of hnswlib).
//
// What it adds over hnswlib-node's binding:
// - addPoints: batch insertion on several threads of its own, off the event loop, returning a
//   Promise. hnswlib allows concurrent insertions of distinct labels but not a search (or any
//   other read) at the same time as an insertion (searches take no locks; the maintainers'
//   answers in the nmslib/hnswlib GitHub issues 29, 100 and 562), so every other method runs with
//   the insertion threads paused: the caller brackets them with pause() / resume(). pause()
//   blocks until every insertion thread has finished the point it is inserting (one insertion:
//   ~0.1 ms at 128-d, ~0.5 ms at 768-d) and starts no new one until resume(). A method that reads
//   the graph while a batch runs unpaused throws.
// - Float32Array arguments and results (no per-element JavaScript numbers), and the search
//   breadth (ef) as an argument of the search.
// - exactKnn: exact distances of a list of labels to the vectors the graph holds (the exact scan
//   of filtered queries: no second copy of the vectors elsewhere).
// - addPointsSync: a batch inserted on several threads while the calling thread waits (start-up).
// - mallocTrim(): glibc's malloc_trim(0), which hands free memory of every malloc arena back to
//   the kernel (a bulk upload leaves tens of MB free in the arenas of the threads that parsed and
//   inserted it).
//
// The file format is hnswlib's (saveIndex / loadIndex): files written by hnswlib-node and by this
// binding load in either.

#include <napi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <queue>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "hnswlib/hnswlib.h"

namespace {

using Hnsw = hnswlib::HierarchicalNSW<float>;

class JsFilter : public hnswlib::BaseFilterFunctor {
 public:
  JsFilter(Napi::Env env, Napi::Function fn) : env_(env), fn_(fn) {}
  bool operator()(hnswlib::labeltype id) override {
    return fn_.Call({Napi::Number::New(env_, static_cast<double>(id))}).ToBoolean().Value();
  }

 private:
  Napi::Env env_;
  Napi::Function fn_;
};

// Search results as hnswlib returns them: a max-heap of (distance, label).
using Neighbors = std::priority_queue<std::pair<float, hnswlib::labeltype>>;

// { neighbors: Uint32Array, distances: Float32Array } of `r`, nearest first (empties `r`).
Napi::Object neighborsObject(Napi::Env env, Neighbors& r) {
  const size_t n = r.size();
  auto neighbors = Napi::Uint32Array::New(env, n);
  auto distances = Napi::Float32Array::New(env, n);
  for (size_t i = n; i-- > 0;) {
    neighbors[i] = static_cast<uint32_t>(r.top().second);
    distances[i] = r.top().first;
    r.pop();
  }
  auto out = Napi::Object::New(env);
  out.Set("neighbors", neighbors);
  out.Set("distances", distances);
  return out;
}

// Runs f(), turning hnswlib's std::exceptions into JavaScript errors with the same message.
template <class F>
auto guarded(Napi::Env env, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const Napi::Error&) {
    throw;  // already a JavaScript error (a filter callback threw)
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

class Graph;

// Work on a libuv pool thread whose end settles a Promise: resolved with result() (undefined
// unless overridden), rejected with the error Execute() set. `self`, when given, keeps that
// JavaScript object (the graph the work uses) alive until the end.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  PromiseWorker(Napi::Env env, Napi::Object self) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)) {
    if (!self.IsEmpty()) self_ = Napi::Persistent(self);
  }
  // Queues the work and returns its Promise.
  Napi::Promise Start() {
    Queue();
    return deferred_.Promise();
  }

 protected:
  virtual Napi::Value result() { return Env().Undefined(); }
  virtual void finished() {}  // on the main thread, before the Promise settles

 private:
  void OnOK() override {
    finished();
    deferred_.Resolve(result());
  }
  void OnError(const Napi::Error& e) override {
    finished();
    deferred_.Reject(e.Value());
  }
  Napi::ObjectReference self_;
  Napi::Promise::Deferred deferred_;
};

// Inserts a batch on `threads` threads of its own (the pool thread only waits for them).
class InsertWorker : public PromiseWorker {
 public:
  // data and labels: the graph's batch buffers (one batch at a time, so nothing else touches them)
  InsertWorker(Napi::Env env, Napi::Object self, Graph* graph, const std::vector<float>& data, const std::vector<uint32_t>& labels, int threads)
      : PromiseWorker(env, self), graph_(graph), data_(data), labels_(labels), threads_(threads) {}
  void Execute() override;

 private:
  Graph* graph_;
  const std::vector<float>& data_;
  const std::vector<uint32_t>& labels_;
  int threads_;
};

// Reads or writes a graph file.
class FileWorker : public PromiseWorker {
 public:
  FileWorker(Napi::Env env, Napi::Object self, Graph* graph, std::string path, bool write)
      : PromiseWorker(env, self), graph_(graph), path_(std::move(path)), write_(write) {}
  void Execute() override;

 protected:
  void finished() override;

 private:
  Graph* graph_;
  std::string path_;
  bool write_;
};

class Graph : public Napi::ObjectWrap<Graph> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Graph",
                       {
                           InstanceMethod("initIndex", &Graph::InitIndex),
                           InstanceMethod("readIndexSync", &Graph::ReadIndexSync),
                           InstanceMethod("readIndex", &Graph::ReadIndex),
                           InstanceMethod("writeIndexSync", &Graph::WriteIndexSync),
                           InstanceMethod("writeIndex", &Graph::WriteIndex),
                           InstanceMethod("resizeIndex", &Graph::ResizeIndex),
                           InstanceMethod("addPoint", &Graph::AddPoint),
                           InstanceMethod("addPoints", &Graph::AddPoints),
                           InstanceMethod("addPointsSync", &Graph::AddPointsSync),
                           InstanceMethod("releaseBatchBuffers", &Graph::ReleaseBatchBuffers),
                           InstanceMethod("pause", &Graph::Pause),
                           InstanceMethod("resume", &Graph::Resume),
                           InstanceMethod("markDelete", &Graph::MarkDelete),
                           InstanceMethod("searchKnn", &Graph::SearchKnn),
                           InstanceMethod("exactKnn", &Graph::ExactKnn),
                           InstanceMethod("getIdsList", &Graph::GetIdsList),
                           InstanceMethod("getMaxElements", &Graph::GetMaxElements),
                           InstanceMethod("getCurrentCount", &Graph::GetCurrentCount),
                       });
  }

  Graph(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Graph>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsString() || !info[1].IsNumber()) throw Napi::TypeError::New(env, "Graph(space: 'l2' | 'ip', dimension: number)");
    std::string space = info[0].As<Napi::String>();
    dim_ = info[1].As<Napi::Number>().Uint32Value();
    if (dim_ == 0) throw Napi::RangeError::New(env, "dimension must be positive");
    if (space == "l2")
      space_.reset(new hnswlib::L2Space(dim_));
    else if (space == "ip")
      space_.reset(new hnswlib::InnerProductSpace(dim_));
    else
      throw Napi::Error::New(env, "space must be 'l2' or 'ip'");
  }

  // ---- insertion threads: pause / resume (see the file comment) ----

  // Called by an insertion thread before each point: waits while paused.
  void enterInsert() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return !paused_; });
    active_++;
  }
  void leaveInsert() {
    std::lock_guard<std::mutex> lk(mu_);
    if (--active_ == 0 && paused_) cv_.notify_all();
  }
  void batchDone() {
    std::lock_guard<std::mutex> lk(mu_);
    running_ = false;
  }

  // Inserts n points (data: n × dimension) on `threads` threads of its own and joins them;
  // returns the first insertion's error ("" when none; the other points go in). With
  // `pausable`, each insertion first waits while the batch is paused (enterInsert).
  std::string insertOnThreads(const float* data, const uint32_t* labels, size_t n, int threads, bool pausable);

  Hnsw* index() { return index_.get(); }
  hnswlib::SpaceInterface<float>* space() { return space_.get(); }
  void setIndex(Hnsw* h) {
    index_.reset(h);
    idOf_.clear();
    idOfCount_ = 0;
  }
  void endFileJob() { fileJob_ = false; }

 private:
  size_t dim_ = 0;
  std::unique_ptr<hnswlib::SpaceInterface<float>> space_;
  std::unique_ptr<Hnsw> index_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool paused_ = false;   // guarded by mu_
  int active_ = 0;        // insertion threads inside addPoint, guarded by mu_
  bool running_ = false;  // a batch is in flight (set on the main thread, cleared by the worker)
  bool fileJob_ = false;  // a file read or write is in flight on the pool
  // Copies of the running batch's arguments, kept between batches: no allocation per batch (a
  // fresh buffer per batch churns glibc's heap and leaves it fragmented after a bulk upload).
  std::vector<float> batchData_;
  std::vector<uint32_t> batchLabels_;
  // Internal id by label (-1: none) for the graph's first idOfCount_ internal ids, brought up to
  // date by syncIdOf: the exact scan's lookups without hnswlib's hash map. hnswlib hands out
  // internal ids in order and never gives a label another one (no replace_deleted), so the
  // points added since the last sync are exactly the ids from idOfCount_ on. Main thread only.
  std::vector<int32_t> idOf_;
  size_t idOfCount_ = 0;
  // Internal ids of the exact scan's candidates (reused).
  std::vector<uint32_t> scanIds_;

  Hnsw& need(Napi::Env env) {
    if (!index_) throw Napi::Error::New(env, "HNSW graph: not initialized");
    return *index_;
  }
  bool batchRunning() {
    std::lock_guard<std::mutex> lk(mu_);
    return running_;
  }
  // Guards a method that reads or changes the graph from the main thread.
  void exclusive(Napi::Env env) {
    std::lock_guard<std::mutex> lk(mu_);
    if (running_ && !paused_) throw Napi::Error::New(env, "HNSW graph: used while a batch insertion runs unpaused");
  }
  // Guards a method that must not overlap a batch at all (resize, file jobs, another batch).
  void idle(Napi::Env env) {
    if (batchRunning()) throw Napi::Error::New(env, "HNSW graph: a batch insertion is running");
    if (fileJob_) throw Napi::Error::New(env, "HNSW graph: a file read or write is running");
  }
  const float* vectorArg(Napi::Env env, const Napi::Value& v) {
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
      throw Napi::TypeError::New(env, "vector must be a Float32Array");
    auto a = v.As<Napi::Float32Array>();
    if (a.ElementLength() != dim_) throw Napi::RangeError::New(env, "vector length " + std::to_string(a.ElementLength()) + " is not the dimension " + std::to_string(dim_));
    return a.Data();
  }

  // Brings idOf_ up to date with the points added since the last call. Insertion threads must be
  // paused or idle: every id below cur_element_count is then fully written.
  void syncIdOf(Hnsw& h) {
    const size_t n = h.cur_element_count;
    for (size_t id = idOfCount_; id < n; id++) {
      size_t label = h.getExternalLabel(static_cast<hnswlib::tableint>(id));
      if (label >= idOf_.size()) idOf_.resize(std::max(label + 1, idOf_.size() * 2), -1);
      idOf_[label] = static_cast<int32_t>(id);
    }
    idOfCount_ = n;
  }

  // initIndex(maxElements, m, efConstruction, randomSeed)
  void InitIndex(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    idle(env);
    size_t max = info[0].As<Napi::Number>().Uint32Value();
    size_t m = info[1].As<Napi::Number>().Uint32Value();
    size_t efc = info[2].As<Napi::Number>().Uint32Value();
    size_t seed = info[3].As<Napi::Number>().Uint32Value();
    guarded(env, [&] { setIndex(new Hnsw(space_.get(), max, m, efc, seed)); });
  }

  void ReadIndexSync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    idle(env);
    guarded(env, [&] { setIndex(new Hnsw(space_.get(), info[0].As<Napi::String>().Utf8Value())); });
  }

  Napi::Value ReadIndex(const Napi::CallbackInfo& info) { return fileJob(info, false); }

  void WriteIndexSync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    idle(env);
    guarded(env, [&] { need(env).saveIndex(info[0].As<Napi::String>().Utf8Value()); });
  }

  // Reads the graph on a pool thread; searches and markDelete may go on meanwhile (hnswlib's
  // saveIndex only reads), insertions and resizes may not.
  Napi::Value WriteIndex(const Napi::CallbackInfo& info) { return fileJob(info, true); }

  Napi::Value fileJob(const Napi::CallbackInfo& info, bool write) {
    Napi::Env env = info.Env();
    idle(env);
    if (write) need(env);
    fileJob_ = true;
    return (new FileWorker(env, Value(), this, info[0].As<Napi::String>().Utf8Value(), write))->Start();
  }

  void ResizeIndex(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    idle(env);
    guarded(env, [&] { need(env).resizeIndex(info[0].As<Napi::Number>().Uint32Value()); });
  }

  // addPoint(vector: Float32Array, label): inserts (or replaces) one point on this thread.
  void AddPoint(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    exclusive(env);
    if (fileJob_) throw Napi::Error::New(env, "HNSW graph: a file read or write is running");
    const float* v = vectorArg(env, info[0]);
    guarded(env, [&] { need(env).addPoint(v, info[1].As<Napi::Number>().Uint32Value()); });
  }

  // The arguments of addPoints / addPointsSync, checked: vectors (n × dimension), labels (n), and
  // capacity in the graph for the labels new to it.
  std::pair<Napi::Float32Array, Napi::Uint32Array> batchArgs(Napi::Env env, const Napi::CallbackInfo& info, Hnsw& h) {
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array ||
        !info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array)
      throw Napi::TypeError::New(env, "addPoints(vectors: Float32Array, labels: Uint32Array, threads)");
    auto vs = info[0].As<Napi::Float32Array>();
    auto ls = info[1].As<Napi::Uint32Array>();
    if (vs.ElementLength() != ls.ElementLength() * dim_) throw Napi::RangeError::New(env, "vectors must hold labels.length × dimension numbers");
    size_t fresh = 0;
    for (size_t i = 0; i < ls.ElementLength(); i++) fresh += h.label_lookup_.count(ls[i]) == 0;
    if (h.getCurrentElementCount() + fresh > h.getMaxElements()) throw Napi::RangeError::New(env, "HNSW graph: not enough capacity for the batch");
    return {vs, ls};
  }

  // addPoints(vectors: Float32Array (n × dimension), labels: Uint32Array (n), threads):
  // Promise<void>. The arguments are copied; capacity for the labels new to the graph must already
  // be there (resizeIndex).
  Napi::Value AddPoints(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    idle(env);
    auto [vs, ls] = batchArgs(env, info, need(env));
    int threads = std::max(1, static_cast<int>(info[2].As<Napi::Number>().Int32Value()));
    batchData_.assign(vs.Data(), vs.Data() + vs.ElementLength());
    batchLabels_.assign(ls.Data(), ls.Data() + ls.ElementLength());
    {
      std::lock_guard<std::mutex> lk(mu_);
      running_ = true;
      paused_ = false;
    }
    return (new InsertWorker(env, Value(), this, batchData_, batchLabels_, threads))->Start();
  }

  // addPointsSync(vectors, labels, threads): addPoints blocking the calling thread until every
  // point is in (no copy, no pause: nothing else can use the graph meanwhile). @throws the first
  // insertion's error (the other points go in).
  void AddPointsSync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    idle(env);
    auto [vs, ls] = batchArgs(env, info, need(env));
    int threads = std::max(1, static_cast<int>(info[2].As<Napi::Number>().Int32Value()));
    std::string err = insertOnThreads(vs.Data(), ls.Data(), ls.ElementLength(), threads, false);
    if (!err.empty()) throw Napi::Error::New(env, err);
  }

  // releaseBatchBuffers(): frees the copies kept for the next batch (between bursts of writes).
  void ReleaseBatchBuffers(const Napi::CallbackInfo& info) {
    idle(info.Env());
    std::vector<float>().swap(batchData_);
    std::vector<uint32_t>().swap(batchLabels_);
  }

  // pause(): returns once no insertion thread is inside an insertion; none starts until resume().
  void Pause(const Napi::CallbackInfo&) {
    std::unique_lock<std::mutex> lk(mu_);
    paused_ = true;
    cv_.wait(lk, [this] { return active_ == 0; });
  }

  void Resume(const Napi::CallbackInfo&) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      paused_ = false;
    }
    cv_.notify_all();
  }

  void MarkDelete(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    exclusive(env);
    guarded(env, [&] { need(env).markDelete(info[0].As<Napi::Number>().Uint32Value()); });
  }

  // searchKnn(query: Float32Array, k, ef, filter?: (label) => boolean):
  // { neighbors: Uint32Array, distances: Float32Array }, nearest first.
  Napi::Value SearchKnn(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    exclusive(env);
    Hnsw& h = need(env);
    const float* q = vectorArg(env, info[0]);
    size_t k = info[1].As<Napi::Number>().Uint32Value();
    size_t ef = info[2].As<Napi::Number>().Uint32Value();
    std::unique_ptr<JsFilter> filter;
    if (info.Length() > 3 && info[3].IsFunction()) filter.reset(new JsFilter(env, info[3].As<Napi::Function>()));
    h.setEf(std::max(ef, k));
    Neighbors r = guarded(env, [&] { return h.searchKnn(q, k, filter.get()); });
    return neighborsObject(env, r);
  }

  // exactKnn(query: Float32Array, labels: Int32Array, count, k, current: Uint8Array): the k nearest
  // of labels[0..count) by exact distance to the vectors the graph holds (the same distance
  // function as searchKnn), skipping a label whose current[label] is not 1, that the graph does not
  // hold, or that is mark-deleted. { neighbors: Uint32Array, distances: Float32Array }, nearest first.
  Napi::Value ExactKnn(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    exclusive(env);
    Hnsw& h = need(env);
    const float* q = vectorArg(env, info[0]);
    if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
      throw Napi::TypeError::New(env, "labels must be an Int32Array");
    if (!info[4].IsTypedArray() || info[4].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
      throw Napi::TypeError::New(env, "current must be a Uint8Array");
    auto labels = info[1].As<Napi::Int32Array>();
    size_t count = std::min<size_t>(info[2].As<Napi::Number>().Uint32Value(), labels.ElementLength());
    size_t k = info[3].As<Napi::Number>().Uint32Value();
    auto current = info[4].As<Napi::Uint8Array>();
    const int32_t* ls = labels.Data();
    const uint8_t* cur = current.Data();
    const size_t curLen = current.ElementLength();
    Neighbors top;  // at most k
    if (k > 0) {
      syncIdOf(h);
      scanIds_.clear();
      for (size_t i = 0; i < count; i++) {
        int32_t l = ls[i];
        if (l < 0 || static_cast<size_t>(l) >= curLen || cur[l] != 1 || static_cast<size_t>(l) >= idOf_.size()) continue;
        int32_t id = idOf_[l];
        if (id >= 0) scanIds_.push_back(static_cast<uint32_t>(id));
      }
      // the vectors lie scattered in hnswlib's level-0 block: fetch a few candidates ahead
      constexpr size_t AHEAD = 4;
      const size_t m = scanIds_.size();
      for (size_t i = 0; i < std::min(AHEAD, m); i++) __builtin_prefetch(h.getDataByInternalId(scanIds_[i]));
      for (size_t i = 0; i < m; i++) {
        if (i + AHEAD < m) __builtin_prefetch(h.getDataByInternalId(scanIds_[i + AHEAD]));
        const hnswlib::tableint id = scanIds_[i];
        if (h.isMarkedDeleted(id)) continue;
        float d = h.fstdistfunc_(q, h.getDataByInternalId(id), h.dist_func_param_);
        if (top.size() == k && d >= top.top().first) continue;
        top.emplace(d, h.getExternalLabel(id));
        if (top.size() > k) top.pop();
      }
    }
    return neighborsObject(env, top);
  }

  Napi::Value GetIdsList(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    exclusive(env);
    Hnsw& h = need(env);
    auto out = Napi::Uint32Array::New(env, h.label_lookup_.size());
    size_t i = 0;
    for (const auto& kv : h.label_lookup_) out[i++] = static_cast<uint32_t>(kv.first);
    return out;
  }

  Napi::Value GetMaxElements(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(need(info.Env()).getMaxElements()));
  }
  Napi::Value GetCurrentCount(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(need(info.Env()).getCurrentElementCount()));
  }
};

std::string Graph::insertOnThreads(const float* data, const uint32_t* labels, size_t n, int threads, bool pausable) {
  Hnsw* h = index_.get();
  std::atomic<size_t> next{0};
  std::mutex errMu;
  std::string err;
  auto run = [&]() {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= n) break;
      if (pausable) enterInsert();
      try {
        h->addPoint(data + i * dim_, labels[i]);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(errMu);
        if (err.empty()) err = e.what();
      }
      if (pausable) leaveInsert();
    }
  };
  std::vector<std::thread> pool;
  int t = std::min<int>(threads, static_cast<int>(n));
  try {
    for (int i = 0; i < t; i++) pool.emplace_back(run);
  } catch (const std::exception&) {
    // could not start another thread: the ones started do the work
  }
  if (pool.empty()) run();
  for (auto& th : pool) th.join();
  return err;
}

void InsertWorker::Execute() {
  std::string err = graph_->insertOnThreads(data_.data(), labels_.data(), labels_.size(), threads_, true);
  graph_->batchDone();
  if (!err.empty()) SetError(err);
}

void FileWorker::Execute() {
  try {
    if (write_)
      graph_->index()->saveIndex(path_);
    else
      graph_->setIndex(new Hnsw(graph_->space(), path_));
  } catch (const std::exception& e) {
    SetError(e.what());
  }
}
void FileWorker::finished() { graph_->endFileJob(); }

// malloc_trim(0) on a libuv pool thread (it walks every arena, taking each one's lock in turn).
class TrimWorker : public PromiseWorker {
 public:
  explicit TrimWorker(Napi::Env env) : PromiseWorker(env, Napi::Object()) {}
  void Execute() override {
#if defined(__GLIBC__)
    released_ = malloc_trim(0) != 0;
#endif
  }

 protected:
  Napi::Value result() override { return Napi::Boolean::New(Env(), released_); }

 private:
  bool released_ = false;
};

Napi::Value MallocTrim(const Napi::CallbackInfo& info) {
  return (new TrimWorker(info.Env()))->Start();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("Graph", Graph::Define(env));
  exports.Set("mallocTrim", Napi::Function::New(env, MallocTrim));
  return exports;
}

}  // namespace

NODE_API_MODULE(svc_hnsw, Init)
