// EtcdClient over etcd's v3 JSON gateway. Its conventions: keys and values are base64, int64
// fields are JSON strings, and fields equal to their zero value are left out ("succeeded":false,
// an empty value, the TTL of a lease that is gone).
//
// HTTP goes through HttpPost (http_post.h), not cpp-httplib, which cannot read its errors.
#include "common/etcd_client.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/etcd_address.h"
#include "common/http_post.h"

namespace kvtier {
namespace {

using nlohmann::json;

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');  // EVP_EncodeBlock adds a NUL
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// Throws on bad input; the public methods turn that into kProtocolError.
std::string Unbase64(const std::string& in) {
  if (in.size() % 4 != 0) throw std::runtime_error("bad base64 length");
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) throw std::runtime_error("bad base64");
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t len = static_cast<size_t>(n);
  for (size_t i = in.size(); i > 0 && in[i - 1] == '=' && len > 0; --i) --len;
  out.resize(len);
  return out;
}

// An int64 field: a JSON string (or a number, to be lenient); absent means 0.
int64_t Int(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  const std::string& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    throw std::runtime_error(std::string("bad integer in \"") + field + "\": " + s);
  }
  return v;
}

std::string Bytes(const json& j, const char* field) {
  auto it = j.find(field);
  return it == j.end() ? std::string() : Unbase64(it->get<std::string>());
}

int64_t Revision(const json& answer) {
  auto it = answer.find("header");
  return it == answer.end() ? 0 : Int(*it, "revision");
}

EtcdKv ParseKv(const json& j) {
  EtcdKv kv;
  kv.key = Bytes(j, "key");
  kv.value = Bytes(j, "value");
  kv.create_revision = Int(j, "create_revision");
  kv.mod_revision = Int(j, "mod_revision");
  kv.lease = Int(j, "lease");
  return kv;
}

// The end of the range of keys starting with `prefix`: its last byte incremented, after trailing
// 0xff bytes are dropped; "\0" (no end) when nothing is left.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

json OpJson(const EtcdOp& op) {
  json req = {{"key", Base64(op.key)}};
  switch (op.kind) {
    case EtcdOp::Kind::kPut:
      req["value"] = Base64(op.value);
      if (op.lease != 0) req["lease"] = std::to_string(op.lease);
      return {{"request_put", req}};
    case EtcdOp::Kind::kDelete:
      return {{"request_delete_range", req}};
    case EtcdOp::Kind::kGet:
      return {{"request_range", req}};
  }
  return {};
}

// Runs `parse` on an answer; a malformed one (a missing field of the wrong type, bad base64)
// becomes kProtocolError instead of an exception.
template <typename T, typename F>
Result<T> Parse(const char* what, F&& parse) {
  try {
    return parse();
  } catch (const std::exception& e) {
    return Status(Code::kProtocolError,
                  std::string("etcd ") + what + ": malformed answer: " + e.what());
  }
}

}  // namespace

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  return EtcdOp{Kind::kPut, std::move(key), std::move(value), lease};
}
EtcdOp EtcdOp::Delete(std::string key) { return EtcdOp{Kind::kDelete, std::move(key), {}, 0}; }
EtcdOp EtcdOp::Get(std::string key) { return EtcdOp{Kind::kGet, std::move(key), {}, 0}; }

EtcdClient::EtcdClient(std::string endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {
  auto parsed = ParseEtcdEndpointList(endpoints_);
  if (parsed.ok()) {
    parsed_ = std::move(*parsed);
  } else {
    parse_error_ = parsed.status().message();
  }
}

EtcdClient::~EtcdClient() = default;

Result<json> EtcdClient::Call(const std::string& path, const json& body, bool resend_safe) {
  if (!parse_error_.empty()) return Status(Code::kInvalidArgument, parse_error_);
  const std::string request = body.dump();
  const size_t first = preferred_.load(std::memory_order_relaxed);
  std::string errors;
  for (size_t i = 0; i < parsed_.size(); ++i) {
    const size_t index = (first + i) % parsed_.size();
    const EtcdEndpoint& ep = parsed_[index];
    const std::string where = ep.host + ":" + std::to_string(ep.port);
    const HttpPostResult res =
        HttpPost(ep.host, ep.port, path, request, "application/json", timeout_);
    if (!res.answered) {
      errors += (errors.empty() ? "" : "; ") + where + ": " + res.error;
      if (!res.sent || resend_safe) continue;
      return Status(Code::kUnavailable, "etcd " + path + " at " + where + ": " + res.error +
                                            " (the request may have been applied)");
    }
    preferred_.store(index, std::memory_order_relaxed);
    json answer = json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (res.status / 100 != 2) {
      // etcd's errors: {"error":..,"message":..,"code":N}; anything else is quoted as it came.
      std::string message = res.body.substr(0, 200);
      if (answer.is_object() && answer.contains("message") && answer["message"].is_string()) {
        message = answer["message"].get<std::string>();
      }
      Code code = Code::kIoError;
      if (res.status == 400) code = Code::kInvalidArgument;
      if (res.status == 404 && answer.is_object()) code = Code::kNotFound;
      if (res.status == 503) code = Code::kUnavailable;
      return Status(code, "etcd " + path + " at " + where + ": HTTP " + std::to_string(res.status) +
                              ": " + message);
    }
    if (!answer.is_object()) {
      return Status(Code::kProtocolError, "etcd " + path + " at " + where +
                                              ": not a JSON object: " + res.body.substr(0, 200));
    }
    return answer;
  }
  return Status(Code::kUnavailable, "etcd at " + endpoints_ + " is unreachable: " + errors);
}

Result<int64_t> EtcdClient::GrantLease(int64_t ttl_s) {
  auto r = Call("/v3/lease/grant", {{"TTL", std::to_string(ttl_s)}}, false);
  if (!r.ok()) return r.status();
  return Parse<int64_t>("lease grant", [&] {
    const int64_t id = Int(*r, "ID");
    if (id == 0) throw std::runtime_error("no lease ID");
    return id;
  });
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease_id) {
  auto r = Call("/v3/lease/keepalive", {{"ID", std::to_string(lease_id)}}, true);
  if (!r.ok()) return r.status();
  // A streaming call: the answer is wrapped in "result", or an error after the status line.
  if (r->contains("error")) {
    return Status(Code::kIoError, "etcd lease keepalive: " + r->at("error").dump());
  }
  return Parse<int64_t>("lease keepalive", [&] {
    const int64_t ttl = Int(r->at("result"), "TTL");
    return ttl > 0 ? ttl : 0;
  });
}

Status EtcdClient::RevokeLease(int64_t lease_id) {
  return Call("/v3/lease/revoke", {{"ID", std::to_string(lease_id)}}, true).status();
}

Result<std::optional<EtcdKv>> EtcdClient::Get(const std::string& key) {
  auto r = Call("/v3/kv/range", {{"key", Base64(key)}}, true);
  if (!r.ok()) return r.status();
  return Parse<std::optional<EtcdKv>>("range", [&]() -> std::optional<EtcdKv> {
    auto kvs = r->find("kvs");
    if (kvs == r->end() || kvs->empty()) return std::nullopt;
    return ParseKv(kvs->at(0));
  });
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  json req = {{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) req["lease"] = std::to_string(lease);
  return Call("/v3/kv/put", req, true).status();
}

Status EtcdClient::Delete(const std::string& key) {
  return Call("/v3/kv/deleterange", {{"key", Base64(key)}}, true).status();
}

Status EtcdClient::DeletePrefix(const std::string& prefix) {
  const std::string from = prefix.empty() ? std::string(1, '\0') : prefix;
  const json req = {{"key", Base64(from)}, {"range_end", Base64(PrefixEnd(prefix))}};
  return Call("/v3/kv/deleterange", req, true).status();
}

Status EtcdClient::RangePrefix(const std::string& prefix,
                               const std::function<void(const EtcdKv&)>& fn, size_t page_size) {
  // etcd has no empty key: "\0" is the first possible one.
  std::string from = prefix.empty() ? std::string(1, '\0') : prefix;
  const std::string end = Base64(PrefixEnd(prefix));
  int64_t revision = 0;
  while (true) {
    json req = {{"key", Base64(from)}, {"range_end", end}, {"limit", std::to_string(page_size)}};
    if (revision != 0) req["revision"] = std::to_string(revision);
    auto r = Call("/v3/kv/range", req, true);
    if (!r.ok()) return r.status();
    std::vector<EtcdKv> page;
    auto parsed = Parse<bool>("range", [&] {
      if (revision == 0) revision = Revision(*r);
      if (auto kvs = r->find("kvs"); kvs != r->end()) {
        for (const json& kv : *kvs) page.push_back(ParseKv(kv));
      }
      return r->value("more", false);
    });
    if (!parsed.ok()) return parsed.status();
    for (const EtcdKv& kv : page) fn(kv);
    if (!*parsed || page.empty()) return Status::Ok();
    from = page.back().key + '\0';  // the next key after the last one
  }
}

Result<EtcdTxnResult> EtcdClient::Txn(const std::vector<EtcdCompare>& compares,
                                      const std::vector<EtcdOp>& success,
                                      const std::vector<EtcdOp>& failure) {
  json req = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const EtcdCompare& c : compares) {
    req["compare"].push_back({{"key", Base64(c.key)},
                              {"target", "CREATE"},
                              {"result", "EQUAL"},
                              {"create_revision", std::to_string(c.create_revision)}});
  }
  for (const EtcdOp& op : success) req["success"].push_back(OpJson(op));
  for (const EtcdOp& op : failure) req["failure"].push_back(OpJson(op));
  auto r = Call("/v3/kv/txn", req, false);
  if (!r.ok()) return r.status();
  return Parse<EtcdTxnResult>("txn", [&] {
    EtcdTxnResult out;
    out.succeeded = r->value("succeeded", false);
    out.revision = Revision(*r);
    if (auto responses = r->find("responses"); responses != r->end()) {
      for (const json& resp : *responses) {
        auto range = resp.find("response_range");
        if (range == resp.end()) continue;
        if (auto kvs = range->find("kvs"); kvs != range->end()) {
          for (const json& kv : *kvs) out.kvs.push_back(ParseKv(kv));
        }
      }
    }
    return out;
  });
}

}  // namespace kvtier
