// Writes the seed corpora: for body_fuzzer one valid encoded body per message type, plus a few
// frames; for handoff_fuzzer hand-off requests; for store_fuzzer master requests, dummy frames
// and a data-plane header; for connectors_fuzzer an fs header, keys and adapter configs; for
// lmcache_fuzzer the frames lmcache 0.5.6's client sends (tests/unit/server/lmcache_codec_test.cc).
// Run once (scripts/fuzz.sh --make-corpus) and commit the output; seeds only need to be valid, not
// current, so they are not regenerated on every run.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <msgpack.hpp>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "connectors/fs_object_file.h"
#include "store/protocol/dummy_protocol.h"
#include "store/protocol/master_protocol.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/rpc_records.h"
#include "wire/frames.h"
#include "wire/messages.h"

namespace {

using kvtier::ChunkHash;
using kvtier::wire::BodyWriter;

void Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

template <typename M>
std::string Body(const M& m) {
  BodyWriter w;
  m.Encode(w);
  return w.Finish();
}

kvtier::wire::KvLayout Layout() {
  kvtier::wire::KvLayout l;
  l.num_blocks = 16;
  l.block_tokens = 16;
  l.block_bytes = 16 * 128;
  for (uint64_t r = 0; r < 4; ++r) l.regions.push_back({0, r * 16 * 16 * 128, 16 * 128});
  return l;
}

std::string Hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// lmcache_fuzzer's input: a selector byte, then each part as a 2-byte little-endian length and
// its bytes; `parts` are hex.
std::string LmcacheInput(char selector, std::initializer_list<std::string> parts) {
  std::string out(1, selector);
  for (const std::string& h : parts) {
    const std::string p = Hex(h);
    out.push_back(static_cast<char>(p.size() & 0xff));
    out.push_back(static_cast<char>(p.size() >> 8));
    out += p;
  }
  return out;
}

// Recorded from lmcache 0.5.6's client: two bf16 cpu_shm layers, model "kvtier-reference", and
// the key of 101 tokens, [0, 96), request "r" (worker 0 or nil).
void WriteLmcacheSeeds(const std::string& dir) {
  const std::string desc0 =
      "c7940185a474797065a76370755f73686da873686d5f6e616d65b32f6c6d63616368655f6b765f32363839325f"
      "30a66e6279746573cd6000a776657273696f6e01a86d6574616461746185a56474797065a862666c6f61743136"
      "a57368617065950218100208a673747269646595cd1800cd0100100801ae73746f726167655f6f666673657400"
      "ab6465766963655f75756964a3637075";
  std::string desc1 = desc0;
  desc1[desc1.find("5f30a66e") + 3] = '1';  // shm name ..._1
  const std::string model = "b06b76746965722d7265666572656e6365";
  const std::string groups =
      "9186af656e67696e655f67726f75705f696400ad6c617965725f696e6469636573920001b0746f6b656e735f70"
      "65725f626c6f636b10ae73775f73697a655f746f6b656e73ffb665787472615f6f626a6563745f67726f75705f"
      "74616700af726563757272656e745f7374617465c2";
  const std::string head =
      "8aaa6d6f64656c5f6e616d65b06b76746965722d7265666572656e6365aa776f726c645f73697a6501a9776f72"
      "6b65725f6964";
  const std::string tail =
      "a9746f6b656e5f696473dc00650102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
      "2122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d"
      "4e4f505152535455565758595a5b5c5d5e5f606162636465a5737461727400a3656e6460aa726571756573745f"
      "6964a172aa63616368655f73616c74a0af726571756573745f636f6e66696773c0ae6e756d5f6b765f72656164"
      "65727301";
  const std::string worker_key = head + "00" + tail, lookup_key = head + "c0" + tail;
  const std::string handle = "c40f737475625f6970635f68616e646c65";
  const std::string reg_args[] = {"cd1092", "92" + desc0 + desc1, model,
                                  "01",     "a4766c6c6d",         "81a96b765f6c61796f7574a34e4844",
                                  groups};
  const auto reg = [&](char sel, std::initializer_list<std::string> before) {
    std::string out = LmcacheInput(sel, before);
    for (const std::string& a : reg_args) out += LmcacheInput('\0', {a}).substr(1);
    return out;
  };
  Write(dir, "register", reg('\0', {"02", "01"}));
  Write(dir, "store",
        LmcacheInput('\0', {"03", "06", worker_key, "cd1092", "9196010203040506", handle}));
  Write(dir, "retrieve",
        LmcacheInput('\0', {"07", "07", worker_key, "cd1092", "9196121314151617", handle, "10"}));
  Write(dir, "lookup", LmcacheInput('\0', {"04", "08", lookup_key, "01"}));
  Write(dir, "free_lookup_locks", LmcacheInput('\0', {"06", "0c", lookup_key, "01"}));
  Write(dir, "query_prefetch_status", LmcacheInput('\0', {"05", "09", "a172"}));
  Write(dir, "wait_prefetch_status",
        LmcacheInput('\0', {"05", "0a", "a172", "cb3ff0000000000000"}));
  Write(dir, "end_session", LmcacheInput('\0', {"08", "0d", "a172"}));
  Write(dir, "get_chunk_size", LmcacheInput('\0', {"00", "15"}));
  Write(dir, "ping_scheduler", LmcacheInput('\0', {"01", "16", "c0"}));
  Write(dir, "ping_worker", LmcacheInput('\0', {"01", "16", "cd1092"}));
  Write(dir, "clear", LmcacheInput('\0', {"09", "14", "c2"}));
  Write(dir, "unregister", LmcacheInput('\0', {"0a", "02", "cd1092"}));
  Write(dir, "report_block_allocation",
        LmcacheInput('\0', {"0c", "17", "cd1092", model, "9193000190"}));
  Write(dir, "subscribe_kv_events",
        LmcacheInput(
            '\0', {"0b", "b37375627363726962655f6b765f6576656e7473", "cd1092", model, "00", "40"}));
  Write(dir, "stream_ack", LmcacheInput('\0', {"0b", "", "61636b"}));
  // The argument decoders directly: selector 1 register, 3 store, 5 retrieve, 7 allocation.
  Write(dir, "args_register", reg('\1', {}));
  Write(dir, "args_store", LmcacheInput('\3', {worker_key, "cd1092", "9196010203040506", handle}));
  Write(dir, "args_retrieve",
        LmcacheInput('\5', {worker_key, "cd1092", "9196121314151617", handle, "10"}));
  Write(dir, "args_block_allocation", LmcacheInput('\7', {"cd1092", model, "9193000190"}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s BODY_DIR HANDOFF_DIR STORE_DIR CONNECTORS_DIR LMCACHE_DIR\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  namespace w = kvtier::wire;

  w::HelloRequest hello;
  hello.client = "seed";
  Write(dir, "hello_request", Body(hello));

  w::HelloReply hello_reply;
  hello_reply.version = 1;
  hello_reply.server_version = "0.1.0";
  hello_reply.chunk_size = 256;
  hello_reply.hash = "xxh3";
  hello_reply.max_body_bytes = 16 << 20;
  hello_reply.max_chunks_per_request = 65536;
  {
    BodyWriter bw;
    w::EncodeStatus(bw, kvtier::Status::Ok());
    hello_reply.Encode(bw);
    Write(dir, "hello_reply", bw.Finish());
  }

  w::RegisterRequest reg;
  reg.instance_id = 77;
  reg.model = "llama";
  reg.world_size = 2;
  reg.rank = 1;
  reg.fd_token = 0x1234567890abULL;
  reg.layout = Layout();
  Write(dir, "register_request", Body(reg));
  Write(dir, "kv_layout", Body(reg.layout));

  w::TransferRequest store;
  store.instance_id = 77;
  store.key.request_id = "req-1";
  for (uint32_t t = 0; t < 40; ++t) store.key.tokens.push_back(t * 3 + 1);
  store.key.end = 32;
  store.key.salt = "lora";
  store.block_ids = {0, 1, 2, 3};
  store.skip_first_n_tokens = 16;
  Write(dir, "transfer_tokens", Body(store));

  // Edge cases a mutator rarely reaches on its own: an empty bin must also shrink the map.
  w::TransferRequest empty_blocks = store;
  empty_blocks.block_ids.clear();
  Write(dir, "transfer_empty_blocks", Body(empty_blocks));

  w::PrefixKey lookup;
  lookup.model = "llama";
  lookup.world_size = 2;
  lookup.request_id = "req-2";
  ChunkHash h{};
  for (uint8_t i = 0; i < 3; ++i) {
    h.fill(static_cast<uint8_t>(i + 1));
    lookup.hashes.push_back(h);
  }
  lookup.start = 16;
  Write(dir, "lookup_hashes", Body(lookup));

  w::InstanceRequest inst;
  inst.instance_id = 77;
  Write(dir, "instance_request", Body(inst));

  w::SessionRequest sess;
  sess.request_id = "req-1";
  Write(dir, "session_request", Body(sess));
  sess.wait_us = 250'000;
  Write(dir, "status_long_poll", Body(sess));

  w::StoreReply sr;
  sr.stored_chunks = 1;
  sr.present_chunks = 2;
  sr.skipped_chunks = 3;
  Write(dir, "store_reply", Body(sr));

  w::RetrieveReply rr;
  rr.retrieved_chunks = 5;
  Write(dir, "retrieve_reply", Body(rr));

  w::PrefetchStatusReply pending, done;
  done.hit_chunks = 4;
  Write(dir, "prefetch_pending", Body(pending));
  Write(dir, "prefetch_done", Body(done));

  {
    BodyWriter bw;
    w::EncodeStatus(bw, kvtier::Status(kvtier::Code::kNotFound, "no such key"));
    bw.Put("l1_bytes", uint64_t{1} << 30).Put("hit_ratio", 0.5).Put("delta", int64_t{-3});
    Write(dir, "status_stats", bw.Finish());
  }
  // A token list as a msgpack array rather than a bin: the reader's slow path.
  {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(3);
    pk.pack(std::string("tokens"));
    pk.pack(std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8});
    pk.pack(std::string("request_id"));
    pk.pack(std::string("r"));
    pk.pack(std::string("end"));
    pk.pack(uint32_t{4});
    Write(dir, "prefix_key_array", std::string(buf.data(), buf.size()));
  }
  Write(dir, "uint_frame_small", w::EncodeUintFrame(6));
  Write(dir, "uint_frame_large", w::EncodeUintFrame(UINT64_MAX));

  const std::string hdir = argv[2];
  auto handoff = [](uint32_t version, uint32_t count) {
    std::string s("KVTF", 4);
    s.append(reinterpret_cast<const char*>(&version), 4);
    s.append(reinterpret_cast<const char*>(&count), 4);
    return s;
  };
  Write(hdir, "request_one_fd", handoff(1, 1));
  Write(hdir, "request_many_fds", handoff(1, 64));
  Write(hdir, "request_bad_version", handoff(2, 1));

  // Store seeds; the first byte is store_fuzzer's selector (0 master, 1 dummy, 2 data plane,
  // 3 the master port's record stream).
  const std::string sdir = argv[3];
  namespace st = kvtier::store;
  const std::vector<std::string> keys = {"model@00000001@0@abc", "model@00000001@0@def"};
  for (uint32_t op = 1; op <= st::kMaxMasterRpcOp; ++op) {
    st::MasterRequest m;
    m.op = static_cast<st::MasterRpcOp>(op);
    m.node.id = "node-1";
    m.node.endpoint = "127.0.0.1:50052";
    m.segment.id = 7;
    m.segment.size = 1 << 20;
    m.segment.endpoint = "127.0.0.1:50052";
    m.node_id = "node-1";
    m.segment_id = 7;
    m.keys = keys;
    m.sizes = {4096, 8192};
    m.pattern = "^model@";
    m.force = true;
    m.max_bytes = 1 << 20;
    m.copied = {true, false};
    Write(
        sdir, "master_" + std::string(st::MasterRpcOpName(op)),
        std::string(1, '\0') + std::string(1, static_cast<char>(op)) + st::EncodeMasterRequest(m));
  }
  for (uint32_t op = st::dummy::kMinOp; op <= st::dummy::kMaxOp; ++op) {
    st::dummy::Request d;
    d.op = static_cast<st::dummy::Op>(op);
    d.client_id = "0123456789abcdef";
    d.version = st::dummy::kProtocolVersion;
    d.region = 3;
    d.size = 4096;
    d.keys = {keys[0]};
    d.ranges = {{3, 0, 4096}};
    d.release = {64};
    const std::string frame = st::dummy::EncodeFrame(op, st::dummy::EncodeRequest(d));
    Write(sdir, "dummy_" + std::string(st::dummy::OpName(d.op)), std::string(1, '\1') + frame);
  }
  // A WRITE, and the PROOF that follows an AUTH challenge.
  for (const auto& [op, name, segment, offset, length] :
       {std::tuple{st::dp::Op::kWrite, "data_plane_write", 7, 4096, 65536},
        std::tuple{st::dp::Op::kProof, "data_plane_proof", 0, 0,
                   static_cast<int>(st::dp::kProofPayloadBytes)}}) {
    st::dp::RequestHeader h;
    h.op = op;
    h.request_id = 1;
    h.segment_id = static_cast<uint64_t>(segment);
    h.offset = static_cast<uint64_t>(offset);
    h.length = static_cast<uint64_t>(length);
    std::string bytes(st::dp::kRequestHeaderBytes + 8, '\0');
    st::dp::EncodeRequestHeader(
        h, std::span<uint8_t, st::dp::kRequestHeaderBytes>(reinterpret_cast<uint8_t*>(bytes.data()),
                                                           st::dp::kRequestHeaderBytes));
    const uint64_t segment_size = 1 << 20;
    std::memcpy(bytes.data() + st::dp::kRequestHeaderBytes, &segment_size, 8);
    Write(sdir, name, std::string(1, '\2') + bytes);
  }
  {
    // The master port's stream: selector 3, a chunk-size byte, then two records in the clear.
    st::MasterRequest m;
    m.op = st::MasterRpcOp::kExist;
    m.keys = keys;
    std::string stream;
    for (uint64_t id : {1, 2}) {
      (void)st::rpc::AppendRecord(stream, id, static_cast<uint32_t>(m.op),
                                  st::EncodeMasterRequest(m), nullptr);
    }
    Write(sdir, "rpc_records_exist", std::string(1, '\3') + std::string(1, '\7') + stream);
  }

  // Connector seeds; the first byte is connectors_fuzzer's selector (0 fs header, 1 key, 2 JSON).
  const std::string cdir = argv[4];
  {
    kvtier::FsHeader h;
    h.payload_length = 16384;
    h.payload_hash = 0x1234;
    h.key_hash = kvtier::FsKeyHash(keys[0]);
    const auto head = kvtier::EncodeFsHeader(h);
    Write(cdir, "fs_header", std::string(1, '\0') + std::string(head.begin(), head.end()));
  }
  Write(cdir, "key_plain", std::string(1, '\1') + keys[0]);
  Write(cdir, "key_dots", std::string(1, '\1') + "../../etc/passwd@x");
  Write(cdir, "key_slashes", std::string(1, '\1') + "a/b/./c%2f..");
  const char* configs[] = {
      R"({"type":"fs","path":"/tmp/x","num_workers":2})",
      R"({"type":"resp","port":6379,"per_op_workers":{"lookup":1,"retrieve":1,"store":2}})",
      R"({"type":"store","server_address":"127.0.0.1:50052","deadline_ms":1000,"max_inflight_mb":64})",
  };
  for (size_t i = 0; i < std::size(configs); ++i) {
    Write(cdir, "adapter_json_" + std::to_string(i), std::string(1, '\2') + configs[i]);
  }
  WriteLmcacheSeeds(argv[5]);
  return 0;
}
