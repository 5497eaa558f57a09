// The measurement store on SQLite (include/gpusim/measurement.h; schema in core/truth/README.md).
#include <sqlite3.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "gpusim/measurement.h"
#include "sim/work_json.h"
#include "base/json_text.h"
#include "base/hash.h"

namespace gpusim {
namespace {

// A JSON column: a store another program wrote may hold anything, so its nesting is bounded before
// nlohmann and the recursive readers see it (a too-deep column throws as a malformed one does).
nlohmann::json column_json(const std::string& text) {
  if (json_depth_excess(text) != std::string_view::npos) {
    throw nlohmann::json::out_of_range::create(
        406, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels", nullptr);
  }
  return nlohmann::json::parse(text);
}

constexpr const char* kSchema = "gpusim.truth/1";

constexpr const char* kCreate = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS imports (
  id INTEGER PRIMARY KEY,
  command TEXT NOT NULL,
  imported_at TEXT NOT NULL,
  added INTEGER NOT NULL,
  duplicates INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  import_id INTEGER REFERENCES imports(id),
  op TEXT NOT NULL,
  op_class TEXT NOT NULL,
  dims TEXT NOT NULL,
  dtype TEXT NOT NULL,
  work TEXT,
  tile TEXT,
  fused_ops TEXT NOT NULL,
  kernel TEXT NOT NULL,
  kernels_launched INTEGER NOT NULL,
  grid TEXT NOT NULL,
  block TEXT NOT NULL,
  gpu TEXT NOT NULL,
  backend TEXT NOT NULL,
  driver TEXT NOT NULL,
  clocks TEXT NOT NULL,
  runtime TEXT NOT NULL,
  timer TEXT NOT NULL,
  statistic TEXT NOT NULL,
  repeats INTEGER NOT NULL,
  warm_cache INTEGER NOT NULL,
  time_us REAL NOT NULL,
  p50_us REAL NOT NULL,
  p95_us REAL NOT NULL,
  source TEXT NOT NULL,
  source_ref TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS measurements_gpu ON measurements (gpu, op_class);
)sql";

// Whole-model records: the graph each ran and its configuration (columns added to stores made
// before them), and the graphs themselves, once each, so a store prices its records on its own.
constexpr const char* kCreateGraphs = R"sql(
CREATE TABLE IF NOT EXISTS graphs (
  name TEXT PRIMARY KEY,
  bytes BLOB NOT NULL);
)sql";

// The autotuner's cache; added to stores made before it (every open makes sure it is there).
constexpr const char* kCreateTuning = R"sql(
CREATE TABLE IF NOT EXISTS tuning (
  key TEXT PRIMARY KEY,
  device TEXT NOT NULL,
  driver TEXT NOT NULL,
  version TEXT NOT NULL,
  signature TEXT NOT NULL,
  backend TEXT NOT NULL,
  grp TEXT NOT NULL,
  tile TEXT NOT NULL,
  split INTEGER NOT NULL,
  time_us REAL NOT NULL,
  predicted_us REAL NOT NULL,
  candidates INTEGER NOT NULL,
  tuned_at TEXT NOT NULL);
)sql";

// Compiled figures of generated kernels (`gpusim codegen report --db`); added to older stores.
constexpr const char* kCreateCompiled = R"sql(
CREATE TABLE IF NOT EXISTS compiled (
  arch TEXT NOT NULL,
  key TEXT NOT NULL,
  compiler TEXT NOT NULL,
  kernel TEXT NOT NULL,
  op_class TEXT NOT NULL,
  tile TEXT NOT NULL,
  gpu TEXT NOT NULL,
  model TEXT NOT NULL,
  threads INTEGER NOT NULL,
  registers INTEGER NOT NULL,
  smem_bytes INTEGER NOT NULL,
  spill_bytes INTEGER NOT NULL,
  compiled_at TEXT NOT NULL,
  PRIMARY KEY (arch, key));
)sql";

constexpr const char* kColumns =
    "op, op_class, dims, dtype, work, tile, fused_ops, kernel, kernels_launched, grid, block, gpu, backend, driver, "
    "clocks, runtime, timer, statistic, repeats, warm_cache, time_us, p50_us, p95_us, source, source_ref, graph, config";

std::string dims_json(const std::map<std::string, int64_t>& d) { return nlohmann::json(d).dump(-1, ' ', false, kInvalidUtf8); }


std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

std::optional<DType> dtype_named(const std::string& s) {
  for (int i = 1; i <= static_cast<int>(DType::kInt4); ++i) {
    if (dtype_name(static_cast<DType>(i)) == s) return static_cast<DType>(i);
  }
  return std::nullopt;
}

// RAII for one prepared statement.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() const { return s_; }
  void text(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void null(int i) { sqlite3_bind_null(s_, i); }
  void i64(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void real(int i, double v) { sqlite3_bind_double(s_, i, v); }
  std::string col_text(int i) const {
    const unsigned char* t = sqlite3_column_text(s_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

}  // namespace

std::string measurement_key(const Measurement& m) {
  // Every field, each terminated so that ("ab", "c") and ("a", "bc") differ.
  std::string s;
  auto add = [&](const std::string& v) {
    s += v;
    s += '\x1f';
  };
  add(m.op);
  add(m.op_class);
  add(dims_json(m.dims));
  add(std::string(dtype_name(m.dtype)));
  add(m.work ? work_to_json(*m.work).dump(-1, ' ', false, kInvalidUtf8) : "");
  add(m.tile ? tile_to_json(*m.tile).dump(-1, ' ', false, kInvalidUtf8) : "");
  add(nlohmann::json(m.fused_ops).dump(-1, ' ', false, kInvalidUtf8));
  for (const std::string* f : {&m.kernel, &m.grid, &m.block, &m.gpu, &m.backend, &m.driver, &m.clocks, &m.runtime,
                               &m.timer, &m.statistic, &m.source, &m.source_ref}) {
    add(*f);
  }
  add(fmt::format("{}|{}|{}|{:.17g}|{:.17g}|{:.17g}", m.kernels_launched, m.repeats, m.warm_cache, m.time_us, m.p50_us,
                  m.p95_us));
  // Whole-model records (fields added later: records without them keep their keys).
  if (!m.graph.empty() || !m.config.empty()) {
    add(m.graph);
    add(nlohmann::json(m.config).dump(-1, ' ', false, kInvalidUtf8));
  }
  return base::fnv1a_128_hex(s);
}

std::string tuning_key(const std::string& device, const std::string& driver, const std::string& version,
                       const std::string& signature) {
  std::string s;
  for (const std::string* f : {&device, &driver, &version, &signature}) {
    s += *f;
    s += '\x1f';
  }
  return base::fnv1a_128_hex(s);
}

struct MeasurementStore::Impl {
  sqlite3* db = nullptr;
  std::string path;
  bool intact = false;  // check_integrity() passed on this connection: a full scan, done once
  ~Impl() { sqlite3_close(db); }
  Error fail(const std::string& what) const {
    return make_error(ErrorCode::kIo, fmt::format("{}: {}: {}", path, what, db ? sqlite3_errmsg(db) : "no database"));
  }
  Result<Ok> exec(const char* sql, const char* what) const {
    char* msg = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
      Error e = make_error(ErrorCode::kIo, fmt::format("{}: {}: {}", path, what, msg ? msg : "unknown error"));
      sqlite3_free(msg);
      return e;
    }
    return Ok{};
  }
};

MeasurementStore::MeasurementStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MeasurementStore::MeasurementStore(MeasurementStore&&) noexcept = default;
MeasurementStore& MeasurementStore::operator=(MeasurementStore&&) noexcept = default;
MeasurementStore::~MeasurementStore() = default;
const std::string& MeasurementStore::path() const { return impl_->path; }

namespace {

// "file:" URI of a path for sqlite3_open_v2 with SQLITE_OPEN_URI: '%', '?' and '#' escaped.
std::string file_uri(const std::string& path, const char* query) {
  std::string u = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      u += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    } else {
      u += c;
    }
  }
  return u + query;
}

bool damaged_code(int rc) { return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB; }

}  // namespace

Result<MeasurementStore> MeasurementStore::open(const std::string& path, bool create) {
  return open(path, create ? StoreAccess::kCreate : StoreAccess::kWrite);
}

Result<MeasurementStore> MeasurementStore::open_read(const std::string& path) { return open(path, StoreAccess::kRead); }

Result<MeasurementStore> MeasurementStore::open(const std::string& path, StoreAccess access) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  const bool read_only = access == StoreAccess::kRead;
  const int flags = read_only ? SQLITE_OPEN_READONLY
                              : SQLITE_OPEN_READWRITE | (access == StoreAccess::kCreate ? SQLITE_OPEN_CREATE : 0);
  auto open_error = [&](const char* why) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open the measurement store: {}{}", path, why,
                                                  access == StoreAccess::kCreate
                                                      ? ""
                                                      : " (give a store made by `gpusim truth import`)"));
  };
  if (sqlite3_open_v2(path.c_str(), &impl->db, flags, nullptr) != SQLITE_OK) {
    return open_error(impl->db ? sqlite3_errmsg(impl->db) : "out of memory");
  }
  sqlite3_busy_timeout(impl->db, 10000);
  // A file that is not SQLite fails here, on its first read.
  auto probe_schema = [&impl]() -> std::pair<int, std::string> {
    Stmt probe(impl->db, "SELECT value FROM meta WHERE key = 'schema'");
    if (!probe.ok()) return {sqlite3_extended_errcode(impl->db), sqlite3_errmsg(impl->db)};
    const int rc = sqlite3_step(probe.get());
    if (rc == SQLITE_ROW) return {SQLITE_ROW, probe.col_text(0)};
    if (rc == SQLITE_DONE) return {SQLITE_DONE, ""};
    return {sqlite3_extended_errcode(impl->db), sqlite3_errmsg(impl->db)};
  };
  auto [rc, schema] = probe_schema();
  if (read_only && rc != SQLITE_ROW && rc != SQLITE_DONE && !damaged_code(rc) &&
      schema.find("no such table") == std::string::npos) {
    // A WAL store in a folder the user may not write: SQLite cannot make its -shm file. Nobody can
    // write it from here, so read it as immutable.
    sqlite3_close(impl->db);
    impl->db = nullptr;
    if (sqlite3_open_v2(file_uri(path, "?immutable=1").c_str(), &impl->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                        nullptr) != SQLITE_OK) {
      return open_error(impl->db ? sqlite3_errmsg(impl->db) : "out of memory");
    }
    std::tie(rc, schema) = probe_schema();
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    if (damaged_code(rc) || schema.find("no such table") == std::string::npos) {
      return make_error(ErrorCode::kParse,
                        fmt::format("{}: not a gpusim measurement store, or a damaged one ({}); give a .db made by "
                                    "`gpusim truth import`, or a CSV/JSON file to read",
                                    path, schema));
    }
    if (read_only) {
      return make_error(ErrorCode::kParse, fmt::format("{}: not a gpusim measurement store (it has no meta table); give "
                                                       "a .db made by `gpusim truth import`",
                                                       path));
    }
  } else if (rc == SQLITE_ROW && schema != kSchema) {
    return make_error(ErrorCode::kParse,
                      fmt::format("{}: measurement store schema \"{}\"; this gpusim reads \"{}\" (re-import the "
                                  "sources into a new store)",
                                  path, schema, kSchema));
  }
  if (read_only) return MeasurementStore(std::move(impl));
  const bool fresh = rc != SQLITE_ROW;
  // The schema in one IMMEDIATE transaction: two processes creating the same new store queue on the
  // write lock, and the second finds the first's tables (every statement is idempotent).
  if (auto r = impl->exec("BEGIN IMMEDIATE", "cannot lock the store to create its schema"); !r) return r.error();
  auto rollback = [&impl](Error e) {
    sqlite3_exec(impl->db, "ROLLBACK", nullptr, nullptr, nullptr);
    return e;
  };
  if (auto r = impl->exec(kCreate, "cannot create the schema"); !r) return rollback(r.error());
  {
    Stmt put(impl->db, "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?1)");
    put.text(1, kSchema);
    if (sqlite3_step(put.get()) != SQLITE_DONE) return rollback(impl->fail("cannot write the schema version"));
  }
  if (auto r = impl->exec(kCreateTuning, "cannot create the tuning cache table"); !r) return rollback(r.error());
  if (auto r = impl->exec(kCreateGraphs, "cannot create the graphs table"); !r) return rollback(r.error());
  if (auto r = impl->exec(kCreateCompiled, "cannot create the compiled figures table"); !r) return rollback(r.error());
  {
    bool has_graph = false;
    {
      Stmt cols(impl->db, "PRAGMA table_info(measurements)");
      while (sqlite3_step(cols.get()) == SQLITE_ROW) has_graph = has_graph || cols.col_text(1) == "graph";
    }
    if (!has_graph) {
      if (auto r = impl->exec("ALTER TABLE measurements ADD COLUMN graph TEXT NOT NULL DEFAULT '';"
                              "ALTER TABLE measurements ADD COLUMN config TEXT NOT NULL DEFAULT '{}';",
                              "cannot add the whole-model columns");
          !r) {
        return rollback(r.error());
      }
    }
  }
  if (auto r = impl->exec("COMMIT", "cannot commit the schema"); !r) return rollback(r.error());
  if (fresh && path != ":memory:") {
    // WAL, outside the transaction (SQLite cannot change the journal mode inside one). The switch
    // needs the file to itself and SQLite answers "locked" at once rather than wait (no busy
    // handler): processes creating the store together retry until the switch is theirs or done.
    for (int tries = 0;; ++tries) {
      Stmt mode(impl->db, "PRAGMA journal_mode = WAL");
      const int step = mode.ok() ? sqlite3_step(mode.get()) : SQLITE_ERROR;
      if (step == SQLITE_ROW) break;  // the mode it has now (a file system without WAL keeps its own)
      if ((sqlite3_errcode(impl->db) & 0xff) != SQLITE_BUSY || tries >= 1000) {
        return impl->fail("cannot switch to WAL mode");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return MeasurementStore(std::move(impl));
}

Status MeasurementStore::check_integrity() const {
  Stmt s(impl_->db, "PRAGMA quick_check(5)");
  std::vector<std::string> problems;
  if (s.ok()) {
    int rc = SQLITE_ROW;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      const std::string line = s.col_text(0);
      if (line != "ok") problems.push_back(line);
    }
    if (rc != SQLITE_DONE) problems.push_back(sqlite3_errmsg(impl_->db));
  } else {
    problems.push_back(sqlite3_errmsg(impl_->db));
  }
  if (problems.empty()) {
    impl_->intact = true;
    return Ok{};
  }
  return make_error(ErrorCode::kParse,
                    fmt::format("{}: the measurement store is damaged ({}); nothing was written. Restore it from a "
                                "copy, or re-import its sources into a new store (`sqlite3 {} .recover` salvages "
                                "what is readable)",
                                impl_->path, fmt::join(problems, "; "), impl_->path));
}

Result<std::string> MeasurementStore::set_aside(const std::string& path) {
  std::string aside = path + ".damaged";
  std::error_code ec;
  for (int k = 2; std::filesystem::exists(aside, ec); ++k) aside = fmt::format("{}.damaged-{}", path, k);
  std::filesystem::rename(path, aside, ec);
  if (ec) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot move the damaged store aside to {}: {}", path, aside,
                                                  ec.message()));
  }
  for (const char* side : {"-wal", "-shm", "-journal"}) {
    if (std::filesystem::exists(path + side, ec)) std::filesystem::rename(path + side, aside + side, ec);
  }
  return aside;
}

Result<MeasurementStore> MeasurementStore::open_cache(const std::string& path, std::string* note) {
  bool existed = false;
  {
    std::error_code ec;
    existed = std::filesystem::exists(path, ec);
  }
  auto s = open(path, StoreAccess::kCreate);
  Status ok = s ? s->check_integrity() : Status(s.error());
  if (ok || !existed || ok.error().code != ErrorCode::kParse) {
    if (!s) return s.error();
    if (!ok) return ok.error();
    return s;
  }
  if (s) s = make_error(ErrorCode::kIo, "closed");  // close it before the rename
  auto aside = set_aside(path);
  if (!aside) return aside.error();
  if (note) {
    *note = fmt::format("{}: {}; moved to {} and started anew (its measurements stay there)", path, ok.error().message,
                        *aside);
  }
  return open(path, StoreAccess::kCreate);
}

Result<InsertStats> MeasurementStore::insert(const std::vector<Measurement>& records,
                                             const std::string& import_command) {
  sqlite3* db = impl_->db;
  InsertStats st;
  // A damaged store would take the import and then fail every read ("database disk image is
  // malformed"): check first, so an import never reports records it could not keep. Once per
  // connection: the tuner inserts after every kernel, and quick_check reads the whole file.
  if (!impl_->intact) {
    if (auto ok = check_integrity(); !ok) return ok.error();
  }
  if (auto r = impl_->exec("BEGIN IMMEDIATE", "cannot start the import"); !r) return r.error();
  auto rollback = [&](Error e) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return e;
  };
  Stmt imp(db, "INSERT INTO imports (command, imported_at, added, duplicates) VALUES (?1, ?2, 0, 0)");
  imp.text(1, import_command);
  imp.text(2, now_utc());
  if (sqlite3_step(imp.get()) != SQLITE_DONE) return rollback(impl_->fail("cannot record the import"));
  const int64_t import_id = sqlite3_last_insert_rowid(db);
  const std::string sql = fmt::format("INSERT OR IGNORE INTO measurements (key, import_id, {}) VALUES (?1, ?2, "
                                      "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, "
                                      "?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29)",
                                      kColumns);
  Stmt ins(db, sql.c_str());
  if (!ins.ok()) return rollback(impl_->fail("cannot prepare the insert"));
  Stmt put_graph(db, "INSERT OR IGNORE INTO graphs (name, bytes) VALUES (?1, ?2)");
  if (!put_graph.ok()) return rollback(impl_->fail("cannot prepare the graph insert"));
  for (const Measurement& m : records) {
    sqlite3_reset(ins.get());
    ins.text(1, measurement_key(m));
    ins.i64(2, import_id);
    ins.text(3, m.op);
    ins.text(4, m.op_class);
    ins.text(5, dims_json(m.dims));
    ins.text(6, std::string(dtype_name(m.dtype)));
    if (m.work) ins.text(7, work_to_json(*m.work).dump(-1, ' ', false, kInvalidUtf8)); else ins.null(7);
    if (m.tile) ins.text(8, tile_to_json(*m.tile).dump(-1, ' ', false, kInvalidUtf8)); else ins.null(8);
    ins.text(9, nlohmann::json(m.fused_ops).dump(-1, ' ', false, kInvalidUtf8));
    ins.text(10, m.kernel);
    ins.i64(11, m.kernels_launched);
    ins.text(12, m.grid);
    ins.text(13, m.block);
    ins.text(14, m.gpu);
    ins.text(15, m.backend);
    ins.text(16, m.driver);
    ins.text(17, m.clocks);
    ins.text(18, m.runtime);
    ins.text(19, m.timer);
    ins.text(20, m.statistic);
    ins.i64(21, m.repeats);
    ins.i64(22, m.warm_cache ? 1 : 0);
    ins.real(23, m.time_us);
    ins.real(24, m.p50_us);
    ins.real(25, m.p95_us);
    ins.text(26, m.source);
    ins.text(27, m.source_ref);
    ins.text(28, m.graph);
    ins.text(29, nlohmann::json(m.config).dump(-1, ' ', false, kInvalidUtf8));
    if (sqlite3_step(ins.get()) != SQLITE_DONE) return rollback(impl_->fail("cannot insert a measurement"));
    const bool added = sqlite3_changes(db) > 0;
    if (!m.graph.empty() && m.graph_bytes) {
      sqlite3_reset(put_graph.get());
      put_graph.text(1, m.graph);
      sqlite3_bind_blob(put_graph.get(), 2, m.graph_bytes->data(), static_cast<int>(m.graph_bytes->size()),
                        SQLITE_TRANSIENT);
      if (sqlite3_step(put_graph.get()) != SQLITE_DONE) return rollback(impl_->fail("cannot store a graph"));
    }
    if (added) ++st.added; else ++st.duplicates;
  }
  Stmt upd(db, "UPDATE imports SET added = ?1, duplicates = ?2 WHERE id = ?3");
  upd.i64(1, st.added);
  upd.i64(2, st.duplicates);
  upd.i64(3, import_id);
  if (sqlite3_step(upd.get()) != SQLITE_DONE) return rollback(impl_->fail("cannot record the import"));
  if (auto r = impl_->exec("COMMIT", "cannot commit the import"); !r) return rollback(r.error());
  return st;
}

Result<std::vector<Measurement>> MeasurementStore::query(const MeasurementQuery& q) const {
  std::string sql = fmt::format("SELECT {} FROM measurements WHERE (?1 = '' OR gpu = ?1) AND (?2 = '' OR op_class = ?2) "
                                "AND (?3 = '' OR source = ?3) ORDER BY id",
                                kColumns);
  if (q.limit > 0) sql += fmt::format(" LIMIT {}", q.limit);
  Stmt s(impl_->db, sql.c_str());
  if (!s.ok()) return impl_->fail("cannot query the measurements");
  s.text(1, q.gpu);
  s.text(2, q.op_class);
  s.text(3, q.source);
  std::vector<Measurement> out;
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    Measurement m;
    int c = 0;
    m.op = s.col_text(c++);
    m.op_class = s.col_text(c++);
    const std::string where = fmt::format("{}: record {}", impl_->path, out.size() + 1);
    try {
      m.dims = column_json(s.col_text(c++)).get<std::map<std::string, int64_t>>();
      const std::string dt = s.col_text(c++);
      auto d = dtype_named(dt);
      if (!d) return make_error(ErrorCode::kParse, fmt::format("{}: dtype \"{}\" is unknown", where, dt));
      m.dtype = *d;
      if (sqlite3_column_type(s.get(), c) != SQLITE_NULL) {
        auto w = work_from_json(column_json(s.col_text(c)), where);
        if (!w) return w.error();
        m.work = *w;
      }
      ++c;
      if (sqlite3_column_type(s.get(), c) != SQLITE_NULL) {
        auto t = tile_from_json(column_json(s.col_text(c)), where);
        if (!t) return t.error();
        m.tile = *t;
      }
      ++c;
      m.fused_ops = column_json(s.col_text(c++)).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
      return make_error(ErrorCode::kParse, fmt::format("{}: a JSON column is malformed ({})", where, e.what()));
    }
    m.kernel = s.col_text(c++);
    m.kernels_launched = static_cast<int>(sqlite3_column_int64(s.get(), c++));
    m.grid = s.col_text(c++);
    m.block = s.col_text(c++);
    m.gpu = s.col_text(c++);
    m.backend = s.col_text(c++);
    m.driver = s.col_text(c++);
    m.clocks = s.col_text(c++);
    m.runtime = s.col_text(c++);
    m.timer = s.col_text(c++);
    m.statistic = s.col_text(c++);
    m.repeats = sqlite3_column_int64(s.get(), c++);
    m.warm_cache = sqlite3_column_int64(s.get(), c++) != 0;
    m.time_us = sqlite3_column_double(s.get(), c++);
    m.p50_us = sqlite3_column_double(s.get(), c++);
    m.p95_us = sqlite3_column_double(s.get(), c++);
    m.source = s.col_text(c++);
    m.source_ref = s.col_text(c++);
    m.graph = s.col_text(c++);
    try {
      m.config = column_json(s.col_text(c++)).get<std::map<std::string, std::string>>();
    } catch (const nlohmann::json::exception& e) {
      return make_error(ErrorCode::kParse, fmt::format("{}: record {}: the config column is malformed ({})", impl_->path,
                                                       out.size() + 1, e.what()));
    }
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return impl_->fail("cannot read the measurements");
  // The graphs whole-model records ran, each read once.
  std::map<std::string, std::shared_ptr<const std::string>> graphs;
  for (Measurement& m : out) {
    if (m.graph.empty()) continue;
    auto& g = graphs[m.graph];
    if (!g) {
      Stmt gs(impl_->db, "SELECT bytes FROM graphs WHERE name = ?1");
      gs.text(1, m.graph);
      if (sqlite3_step(gs.get()) == SQLITE_ROW) {
        const void* b = sqlite3_column_blob(gs.get(), 0);
        const int n = sqlite3_column_bytes(gs.get(), 0);
        g = std::make_shared<const std::string>(static_cast<const char*>(b), static_cast<size_t>(std::max(0, n)));
      }
    }
    m.graph_bytes = g;
  }
  return out;
}

Result<int64_t> MeasurementStore::count() const {
  Stmt s(impl_->db, "SELECT COUNT(*) FROM measurements");
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_ROW) return impl_->fail("cannot count the measurements");
  return sqlite3_column_int64(s.get(), 0);
}

Result<std::optional<TuningEntry>> MeasurementStore::tuned(const std::string& key) const {
  Stmt s(impl_->db,
         "SELECT device, driver, version, signature, backend, grp, tile, time_us, predicted_us, candidates, tuned_at, "
         "split FROM tuning WHERE key = ?1");
  if (!s.ok()) return impl_->fail("cannot read the tuning cache");
  s.text(1, key);
  const int rc = sqlite3_step(s.get());
  if (rc == SQLITE_DONE) return std::optional<TuningEntry>{};
  if (rc != SQLITE_ROW) return impl_->fail("cannot read the tuning cache");
  TuningEntry e;
  e.key = key;
  e.device = s.col_text(0);
  e.driver = s.col_text(1);
  e.version = s.col_text(2);
  e.signature = s.col_text(3);
  e.backend = s.col_text(4);
  e.group = s.col_text(5);
  // An entry answers only for the key it was built for, and only when whole: one whose fields hash
  // to another key (a row copied or edited by hand), whose tile is malformed or whose time is not a
  // positive number is a miss, and the tuner measures again and replaces it.
  if (tuning_key(e.device, e.driver, e.version, e.signature) != key) return std::optional<TuningEntry>{};
  const std::string where = fmt::format("{}: tuning cache entry {}", impl_->path, key);
  try {
    auto t = tile_from_json(column_json(s.col_text(6)), where);
    if (!t) return std::optional<TuningEntry>{};
    e.tile = *t;
  } catch (const nlohmann::json::exception&) {
    return std::optional<TuningEntry>{};
  }
  e.time_us = sqlite3_column_double(s.get(), 7);
  e.predicted_us = sqlite3_column_double(s.get(), 8);
  e.candidates = static_cast<int>(sqlite3_column_int64(s.get(), 9));
  e.tuned_at = s.col_text(10);
  e.split = sqlite3_column_int64(s.get(), 11) != 0;
  if (!std::isfinite(e.time_us) || e.time_us <= 0) return std::optional<TuningEntry>{};
  return std::optional<TuningEntry>{std::move(e)};
}

Status MeasurementStore::put_tuned(const TuningEntry& e) {
  Stmt s(impl_->db,
         "INSERT OR REPLACE INTO tuning (key, device, driver, version, signature, backend, grp, tile, time_us, "
         "predicted_us, candidates, tuned_at, split) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  if (!s.ok()) return impl_->fail("cannot write the tuning cache");
  s.text(1, e.key);
  s.text(2, e.device);
  s.text(3, e.driver);
  s.text(4, e.version);
  s.text(5, e.signature);
  s.text(6, e.backend);
  s.text(7, e.group);
  s.text(8, tile_to_json(e.tile).dump(-1, ' ', false, kInvalidUtf8));
  s.real(9, e.time_us);
  s.real(10, e.predicted_us);
  s.i64(11, e.candidates);
  s.text(12, now_utc());
  s.i64(13, e.split ? 1 : 0);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return impl_->fail("cannot write the tuning cache");
  return Ok{};
}

Result<TuningCacheInfo> MeasurementStore::tuning_info() const {
  Stmt s(impl_->db,
         "SELECT device, driver, backend, COUNT(*), MAX(tuned_at) FROM tuning GROUP BY device, driver, backend "
         "ORDER BY device, driver");
  if (!s.ok()) return impl_->fail("cannot read the tuning cache");
  TuningCacheInfo info;
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    TuningCacheInfo::Device d{s.col_text(0), s.col_text(1), s.col_text(2), sqlite3_column_int64(s.get(), 3),
                              s.col_text(4)};
    info.entries += d.entries;
    info.devices.push_back(std::move(d));
  }
  if (rc != SQLITE_DONE) return impl_->fail("cannot read the tuning cache");
  return info;
}

Result<int64_t> MeasurementStore::clear_tuned(const std::string& device) {
  Stmt s(impl_->db, "DELETE FROM tuning WHERE ?1 = '' OR device = ?1");
  if (!s.ok()) return impl_->fail("cannot clear the tuning cache");
  s.text(1, device);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return impl_->fail("cannot clear the tuning cache");
  return static_cast<int64_t>(sqlite3_changes(impl_->db));
}

Status MeasurementStore::put_compiled(const std::vector<CompiledKernelRecord>& records) {
  for (size_t i = 0; i < records.size(); ++i) {
    const CompiledKernelRecord& c = records[i];
    const char* bad = c.arch.empty()                                ? "no architecture"
                      : c.key.empty()                               ? "no kernel key"
                      : c.registers < 1 || c.registers > 1024       ? "registers outside 1 to 1024"
                      : c.smem_bytes < 0 || c.spill_bytes < 0       ? "negative shared memory or spills"
                      : c.threads < 0                               ? "negative threads"
                                                                    : nullptr;
    if (bad != nullptr) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: compiled figures record {} (kernel \"{}\", arch \"{}\", registers {}, shared "
                                    "memory {}, spills {}) has {}; nothing was written",
                                    impl_->path, i, c.kernel, c.arch, c.registers, c.smem_bytes, c.spill_bytes, bad));
    }
  }
  if (auto r = impl_->exec("BEGIN IMMEDIATE", "cannot lock the store to add compiled figures"); !r) return r.error();
  auto rollback = [this](Error e) {
    sqlite3_exec(impl_->db, "ROLLBACK", nullptr, nullptr, nullptr);
    return e;
  };
  Stmt s(impl_->db,
         "INSERT OR REPLACE INTO compiled (arch, key, compiler, kernel, op_class, tile, gpu, model, threads, registers, "
         "smem_bytes, spill_bytes, compiled_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  if (!s.ok()) return rollback(impl_->fail("cannot write compiled figures"));
  const std::string at = now_utc();
  for (const CompiledKernelRecord& c : records) {
    sqlite3_reset(s.get());
    s.text(1, c.arch);
    s.text(2, c.key);
    s.text(3, c.compiler);
    s.text(4, c.kernel);
    s.text(5, c.op_class);
    s.text(6, c.tile);
    s.text(7, c.gpu);
    s.text(8, c.model);
    s.i64(9, c.threads);
    s.i64(10, c.registers);
    s.i64(11, c.smem_bytes);
    s.i64(12, c.spill_bytes);
    s.text(13, at);
    if (sqlite3_step(s.get()) != SQLITE_DONE) return rollback(impl_->fail("cannot write compiled figures"));
  }
  if (auto r = impl_->exec("COMMIT", "cannot commit the compiled figures"); !r) return rollback(r.error());
  return Ok{};
}

Result<std::vector<CompiledKernelRecord>> MeasurementStore::compiled(const std::string& arch) const {
  Stmt s(impl_->db,
         "SELECT arch, key, compiler, kernel, op_class, tile, gpu, model, threads, registers, smem_bytes, spill_bytes, "
         "compiled_at FROM compiled WHERE ?1 = '' OR arch = ?1 ORDER BY arch, key");
  if (!s.ok()) {
    // A store made before the table, opened read-only (a writer adds the table): it holds none.
    if (std::string(sqlite3_errmsg(impl_->db)).find("no such table") != std::string::npos) {
      return std::vector<CompiledKernelRecord>{};
    }
    return impl_->fail("cannot read compiled figures");
  }
  s.text(1, arch);
  std::vector<CompiledKernelRecord> out;
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    CompiledKernelRecord c;
    c.arch = s.col_text(0);
    c.key = s.col_text(1);
    c.compiler = s.col_text(2);
    c.kernel = s.col_text(3);
    c.op_class = s.col_text(4);
    c.tile = s.col_text(5);
    c.gpu = s.col_text(6);
    c.model = s.col_text(7);
    c.threads = static_cast<int>(sqlite3_column_int64(s.get(), 8));
    c.registers = static_cast<int>(sqlite3_column_int64(s.get(), 9));
    c.smem_bytes = static_cast<int>(sqlite3_column_int64(s.get(), 10));
    c.spill_bytes = static_cast<int>(sqlite3_column_int64(s.get(), 11));
    c.compiled_at = s.col_text(12);
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return impl_->fail("cannot read compiled figures");
  return out;
}

}  // namespace gpusim
