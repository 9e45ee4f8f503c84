// Internal: the database schema as a list of versioned steps. Version 1 is the first schema
// ever shipped; every later version is a forward migration applied in one transaction.
// A new database is created by running v1 and then every migration, so the migration path
// is exercised on every database. storage/README.md documents the resulting tables.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace snip::store_detail {

inline constexpr int32_t kApplicationId = 0x534E4950;  // "SNIP": PRAGMA application_id of our files

// schema_steps()[i] takes a database from user_version i to i + 1 (step 0 creates v1).
const std::vector<std::string>& schema_steps();

}  // namespace snip::store_detail
