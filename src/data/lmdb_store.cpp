// Read-only access to LMDB environments (DocTamper layout), one cached environment per path.
#include <lmdb.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "diffnet/common.h"
#include "diffnet/dataset.h"

namespace diffnet {
namespace {

struct LmdbEnv {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  ~LmdbEnv() {
    if (env) mdb_env_close(env);
  }
};

std::string lmdb_error(int rc) { return mdb_strerror(rc); }

std::shared_ptr<LmdbEnv> open_env(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<LmdbEnv>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  std::error_code ec;
  unsigned flags = MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK | MDB_NORDAHEAD;
  if (std::filesystem::is_regular_file(path, ec)) {
    flags |= MDB_NOSUBDIR;
  } else if (!std::filesystem::is_regular_file(std::filesystem::path(path) / "data.mdb", ec)) {
    throw Error(path, "not an LMDB (no data.mdb)");
  }
  auto e = std::make_shared<LmdbEnv>();
  int rc = mdb_env_create(&e->env);
  if (rc != 0) throw Error(path, "cannot create LMDB environment: " + lmdb_error(rc));
  mdb_env_set_maxreaders(e->env, 1024);
  rc = mdb_env_open(e->env, path.c_str(), flags, 0444);
  if (rc != 0) throw Error(path, "cannot open LMDB: " + lmdb_error(rc));
  MDB_txn* txn = nullptr;
  rc = mdb_txn_begin(e->env, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) throw Error(path, "cannot begin LMDB transaction: " + lmdb_error(rc));
  rc = mdb_dbi_open(txn, nullptr, 0, &e->dbi);
  mdb_txn_abort(txn);
  if (rc != 0) throw Error(path, "cannot open LMDB database: " + lmdb_error(rc));
  cache[path] = e;
  return e;
}

}  // namespace

bool lmdb_get(const std::string& lmdb_path, const std::string& key, std::vector<uint8_t>& out, size_t max_bytes) {
  auto e = open_env(lmdb_path);
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(e->env, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) throw Error(lmdb_path, "cannot begin LMDB transaction: " + lmdb_error(rc));
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{0, nullptr};
  rc = mdb_get(txn, e->dbi, &k, &v);
  if (rc == MDB_NOTFOUND) {
    mdb_txn_abort(txn);
    return false;
  }
  if (rc != 0) {
    mdb_txn_abort(txn);
    throw Error(lmdb_path, "cannot read key " + key + ": " + lmdb_error(rc));
  }
  const uint8_t* p = static_cast<const uint8_t*>(v.mv_data);
  out.assign(p, p + std::min(v.mv_size, max_bytes));
  mdb_txn_abort(txn);
  return true;
}

}  // namespace diffnet
