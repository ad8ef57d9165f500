// pmix_query.cpp — see pmix_query.hpp.
#include "launch/pmix_query.hpp"

#include <pmix.h>

#include <cstring>

#include "util/error.hpp"

namespace cnnscale {
namespace {

bool get_u32(const pmix_proc_t* proc, const char* key, int& out) {
  pmix_value_t* val = nullptr;
  if (PMIx_Get(proc, key, nullptr, 0, &val) != PMIX_SUCCESS || val == nullptr) return false;
  bool ok = true;
  switch (val->type) {
    case PMIX_UINT32: out = static_cast<int>(val->data.uint32); break;
    case PMIX_UINT16: out = static_cast<int>(val->data.uint16); break;
    case PMIX_INT: out = val->data.integer; break;
    case PMIX_UINT: out = static_cast<int>(val->data.uint); break;
    case PMIX_PROC_RANK: out = static_cast<int>(val->data.rank); break;
    default: ok = false;
  }
  PMIX_VALUE_RELEASE(val);
  return ok;
}

}  // namespace

void query_pmix(LaunchInfo& info) {
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    fail("PMIX_NAMESPACE is set but the PMIx server does not answer (PMIx_Init: ", PMIx_Error_string(rc),
         "); the launcher's PMIx server is gone or this binary's PMIx is incompatible with it");
  pmix_proc_t wildcard;
  PMIX_PROC_CONSTRUCT(&wildcard);
  PMIX_LOAD_NSPACE(wildcard.nspace, me.nspace);
  wildcard.rank = PMIX_RANK_WILDCARD;

  info.rank = static_cast<int>(me.rank);
  info.rank_var = "PMIx rank";
  int v = -1;
  if (get_u32(&wildcard, PMIX_JOB_SIZE, v)) {
    info.size = v;
    info.size_var = "PMIx job size";
  }
  if (get_u32(&me, PMIX_LOCAL_RANK, v)) info.local_rank = v;
  if (get_u32(&wildcard, PMIX_LOCAL_SIZE, v)) info.local_size = v;
  if (get_u32(&me, PMIX_NODEID, v)) info.node_id = v;
  if (get_u32(&wildcard, PMIX_NUM_NODES, v)) info.num_nodes = v;
}

void release_pmix() {
  if (PMIx_Initialized()) PMIx_Finalize(nullptr, 0);
}

}  // namespace cnnscale
