// Workbench: the open store, the planning source and the message channel shared by the views.
#include "workbench.h"

#include <QFileInfo>
#include <QRegularExpression>
#include <algorithm>
#include <utility>

#include "snip/atomic_file.h"
#include "snip/error.h"
#include "snip/store_export.h"

namespace snip::ui {

namespace {
QRegularExpression re(const char* pattern) {
  return QRegularExpression(QString::fromUtf8(pattern));
}
}  // namespace

QString gui_wording(QString text) {
  // The engine and the store speak to the CLI user; most specific phrasing first, then any
  // flag left over. Kept as one table so a new CLI hint needs one new row here.
  static const std::pair<QRegularExpression, QString> kRewrites[] = {
      {re(R"re(pass --db with a writable path)re"),
       QObject::tr("choose a database in a writable folder (File › New database…)")},
      {re(R"re(pass --db on another disk)re"),
       QObject::tr("choose a database on another disk with File › New database…")},
      {re(R"re(\(was another file passed with --db\?\))re"), QObject::tr("(was another file chosen?)")},
      {re(R"re(--db needs a database file path)re"), QObject::tr("choose a database file, not a folder")},
      {re(R"re(pass (another|a new|an existing) --db( file)?)re"),
       QObject::tr("choose another database (File › Open database… or File › New database…)")},
      {re(R"re(point --data at)re"), QObject::tr("set the Run view's Data field to")},
      {re(R"re(\s*\((list|see) [^()]*`snip [^`]*`[^()]*\))re"), QString()},
      {re(R"re(`snip runs --db [^`]*`)re"), QObject::tr("the Run view's table")},
      {re(R"re(--db\b)re"), QObject::tr("the database (File › Open database…)")},
      {re(R"re(--data\b)re"), QObject::tr("the Run view's Data field")},
  };
  for (const auto& [pattern, replacement] : kRewrites) text.replace(pattern, replacement);
  return text;
}

QString error_text(const std::exception& e) {
  return gui_wording(QString::fromStdString(snip::printable_message(e.what())));
}

int PlanningSource::num_blocks() const {
  if (round) return round->dims.num_layers > 0 ? round->dims.num_layers : 0;
  int blocks = 0;
  if (costs)
    for (const snip::CostLayer& l : costs->layers) blocks = std::max(blocks, l.block + 1);
  return blocks;
}

Workbench::Workbench(QObject* parent) : QObject(parent) {
  poll_timer_.setInterval(1500);
  connect(&poll_timer_, &QTimer::timeout, this, &Workbench::poll_now);
  // Connected before any view: a round that just appeared is the source when the views redraw.
  connect(this, &Workbench::data_changed, this, &Workbench::adopt_newest_round_if_none);
}

Workbench::~Workbench() = default;

bool Workbench::open_database(const QString& path) {
  // The database already open: nothing to do. A second connection to it buys nothing, and the
  // views keep what they show.
  if (store_ && QFileInfo(path).exists() &&
      QFileInfo(path).canonicalFilePath() == QFileInfo(database_path()).canonicalFilePath()) {
    report(MessageLevel::info, tr("%1 is the database already open").arg(QFileInfo(path).fileName()));
    return true;
  }
  try {
    // A database the user cannot write is opened read-only (its runs, plans and compares can be
    // looked at; training and imports say that they need a writable copy).
    // Checked whole (SQLite's quick_check) before it replaces the open one: a damaged file is
    // refused here, with the previous database kept, not found out when a run is read.
    auto store = std::make_unique<snip::Store>(
        path.toStdString(), snip::StoreOptions{.check_integrity = true, .read_only_if_unwritable = true});
    store_ = std::move(store);
  } catch (const std::exception& e) {
    // The store refuses a damaged file before writing to it; say so, and how to go on in the GUI
    // (the store's own hints speak of the CLI's --db).
    last_open_error_ = error_text(e);
    const QString now =
        store_ ? tr("Still using %1.").arg(database_path())
               : tr("No database is open: runs, plans and statistics cannot be listed or saved until one is.");
    report(MessageLevel::error,
           tr("Could not open the database %1: %2\nThe file was left as it is. Choose another with File › Open "
              "database… (Ctrl+O) or start an empty one with File › New database… (Ctrl+N); a damaged database can be "
              "restored from a copy. %3")
               .arg(QFileInfo(path).fileName(), last_open_error_, now));
    emit database_open_failed(path, last_open_error_);
    return false;
  }
  last_open_error_.clear();
  last_fingerprint_.clear();
  if (store_->read_only())
    report(MessageLevel::warning,
           tr("%1 is opened read-only (you cannot write it): runs, plans and compares can be looked at; to train or "
              "import, copy it to a writable folder and open the copy.")
               .arg(QFileInfo(path).fileName()));
  last_counter_.reset();
  // Nothing of the previous database stays on screen: its round (or imported costs) would be
  // planned on as if it belonged to this one. The views follow planning_source_changed, then
  // database_changed (which selects this database's own defaults).
  set_planning_source({});
  adopt_newest_round_if_none();
  emit database_changed();
  emit data_changed();
  if (!poll_timer_.isActive()) poll_timer_.start();
  return true;
}

QString Workbench::database_path() const {
  return store_ ? QString::fromStdString(store_->path()) : QString();
}

void Workbench::set_planning_source(PlanningSource source) {
  source_ = std::move(source);
  emit planning_source_changed();
}

snip::PlannerInput Workbench::planner_input(const snip::EstimatorOptions& options) const {
  if (source_.round) return snip::planner_input_from_stats(*source_.round, options);
  if (source_.costs) return snip::planner_input_from_costs(*source_.costs);
  throw snip::Error(
      "no statistics to plan from: select a statistics round of a run, or use File › Import statistics/costs "
      "(snip-stats/1 JSON or a layer,precision,cost,flops CSV)");
}

bool Workbench::import_statistics_or_costs(const QString& path) {
  try {
    // snip::read_file, never a raw QFile: it refuses the database this process has open, whose
    // SQLite locks a raw open and close would drop (files_in_use.h).
    const std::string text(snip::without_utf8_bom(snip::read_file(path.toStdString())));
    const std::string source = QFileInfo(path).fileName().toStdString();
    const bool json =
        !text.empty() &&
        text[text.find_first_not_of(" \t\r\n") == std::string::npos ? 0 : text.find_first_not_of(" \t\r\n")] == '{';
    PlanningSource src;
    if (json) {
      snip::StatsRound round = snip::stats_from_json(text, source);
      snip::estimate_divergences(round);  // fails early, naming a missing statistic
      if (store_) src.round_id = store_->add_stats_round(round);
      src.label = tr("%1 (imported statistics, step %2)").arg(QString::fromStdString(source)).arg(round.step);
      src.round = std::move(round);
    } else {
      src.costs = snip::cost_table_from_csv(text, source);
      src.label = tr("%1 (imported costs)").arg(QString::fromStdString(source));
    }
    set_planning_source(std::move(src));
    report(MessageLevel::info, tr("Imported %1").arg(QString::fromStdString(source)));
    emit data_changed();
    return true;
  } catch (const std::exception& e) {
    report(MessageLevel::error, tr("Import failed: %1").arg(error_text(e)));
    return false;
  }
}

bool Workbench::import_plan(const QString& path) {
  try {
    snip::Plan plan = snip::read_plan_file(path.toStdString());
    if (!store_) throw snip::Error("no database is open: use File › Open database first");
    const int64_t id = store_->add_plan(plan);
    report(MessageLevel::info, tr("Imported plan %1 as plan #%2").arg(QFileInfo(path).fileName()).arg(id));
    emit data_changed();
    return true;
  } catch (const std::exception& e) {
    report(MessageLevel::error, tr("Import failed: %1").arg(error_text(e)));
    return false;
  }
}

bool Workbench::use_stats_round(int64_t round_id) {
  try {
    if (!store_) throw snip::Error("no database is open");
    PlanningSource src;
    src.round = store_->stats_round(round_id);
    src.round_id = round_id;
    src.label = tr("statistics round #%1 (step %2)").arg(round_id).arg(src.round->step);
    set_planning_source(std::move(src));
    return true;
  } catch (const std::exception& e) {
    report(MessageLevel::error, tr("Could not load statistics round #%1: %2").arg(round_id).arg(error_text(e)));
    return false;
  }
}

void Workbench::adopt_newest_round_if_none() {
  if (!store_ || !source_.empty()) return;
  try {
    const auto rounds = store_->stats_rounds();
    if (rounds.empty()) return;
    use_stats_round(std::max_element(rounds.begin(), rounds.end(), [](auto& a, auto& b) { return a.id < b.id; })->id);
  } catch (const std::exception& e) {
    report(MessageLevel::error, tr("Reading statistics rounds failed: %1").arg(error_text(e)));
  }
}

void Workbench::report(MessageLevel level, const QString& text, MessageSubject subject) {
  emit message(level, text, subject);
}

void Workbench::settle(MessageSubject subject) {
  emit settled(subject);
}

void Workbench::poll_now() {
  if (!store_) return;
  // A fingerprint of what the views show; any change (another process writing) refreshes them.
  // The store's change counter (no table read) says first whether anything was committed at all.
  QString fp;
  try {
    const uint64_t counter = store_->change_counter();
    if (last_counter_ && *last_counter_ == counter) return;
    last_counter_ = counter;
    // Read-only: a write here could wait on the training thread's write lock and freeze the UI
    // (runs left by dead processes are marked interrupted when a store opens).
    for (const snip::RunInfo& r : store_->runs())
      fp += QStringLiteral("%1:%2:%3:%4;").arg(r.id).arg(int(r.status)).arg(r.last_step).arg(r.metric_rows);
    fp += QStringLiteral("|p%1|s%2|").arg(store_->plans().size()).arg(store_->stats_rounds().size());
    // A compare changes with every training it stores (its table and note show them).
    for (const snip::CompareRecord& c : store_->list_compares())
      fp += QStringLiteral("c%1:%2:%3;").arg(c.id).arg(int(c.status)).arg(c.stored_trainings);
  } catch (const std::exception& e) {
    poll_timer_.stop();  // one message, not one per tick
    report(MessageLevel::error, tr("Reading the database failed: %1").arg(error_text(e)));
    return;
  }
  if (fp != last_fingerprint_) {
    last_fingerprint_ = fp;
    emit data_changed();
  }
}

}  // namespace snip::ui
