// The workbench's main window: menu bar with shortcuts, the five views (Run, Monitor,
// Sensitivity, Plan, Compare) as tabs, a non-blocking message bar for engine and store
// errors, a status bar, the training worker's thread, window state in QSettings, and the
// screenshot mode (each view rendered to <dir>/<view>.png). One class in several files, by
// concern: main_window.cpp (the window, menus, views and their wiring, training, settings),
// message_bar.cpp, quick_start.cpp, exports.cpp (File › Export), docs_viewer.cpp (Help) and
// screenshots.cpp.
#pragma once
#include <QMainWindow>
#include <QThread>
#include <QTimer>
#include <functional>
#include <memory>
#include <vector>

#include "live_metrics.h"
#include "snip/run_settings.h"
#include "training_worker.h"
#include "workbench.h"

class QDialog;
class QHBoxLayout;
class QLabel;
class QPushButton;
class QTabWidget;
class QToolButton;

namespace snip::ui {

class CompareView;
class MonitorView;
class PlanView;
class RunView;
class SensitivityView;

// The one-click start for a newcomer: an adaptive SNIP run (statistics rounds and plans as it
// trains), then the same run with FP4 everywhere, then both in the Compare view with the plans
// SNIP made. On the bundled corpus; about two minutes on 2 cores with the defaults.
struct QuickStartOptions {
  QString preset = QStringLiteral("tiny");
  int steps = 600;  // both runs: 11 s wall on a 2-core Zen 5 (bench/gui --quick-start-only)
  int replan_every = 150;
  int batch = 8;
  int seq_len = 0;      // 0: the default, min(128, the model's positions)
  double budget = 0.5;  // FP4 FLOP fraction of SNIP's plans
};

// What File › Export writes.
enum class ExportKind {
  plan_json,
  plan_csv,
  plan_megatron,
  plan_te,
  plan_torchao,
  chart_png,
  chart_svg,
  metrics_csv,
  compare_csv
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // Opens `db_path` (the default database when empty). Errors opening it are shown in the
  // message bar; the window stays usable and File › Open database picks another.
  explicit MainWindow(const QString& db_path = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  Workbench* workbench() const { return workbench_; }
  RunView* run_view() const { return run_view_; }
  MonitorView* monitor_view() const { return monitor_view_; }
  SensitivityView* sensitivity_view() const { return sensitivity_view_; }
  PlanView* plan_view() const { return plan_view_; }
  CompareView* compare_view() const { return compare_view_; }
  QTabWidget* tabs() const { return tabs_; }
  TrainingWorker* worker() const { return worker_; }
  std::shared_ptr<LiveMetrics> live_metrics() const { return live_; }

  // The view names used for screenshots and the View menu, in tab order.
  static QStringList view_names();
  void show_view(const QString& name);
  // Renders every view at the window's size to <dir>/<view>.png; returns the files written.
  // Throws snip::Error when the folder cannot be written.
  QStringList render_screenshots(const QString& dir);

  bool training() const;
  // Starts the quick start (Training › Quick start); refused while a run trains.
  void start_quick_start(const QuickStartOptions& options = {});
  bool quick_start_running() const { return quick_stage_ != QuickStage::none; }
  // Writes `kind` to `path` (what the File › Export entries do after asking for the file) and
  // confirms in the message bar, naming the file; an error says why. Returns success.
  bool export_to(ExportKind kind, const QString& path);
  // Help › About's text: the version, the database, links to the documentation.
  QString about_text() const;
  // The README of this installation (share/doc/snip-workbench/ beside bin/) or of the source
  // tree it was built from; empty when neither exists.
  static QString readme_path();
  // The text of the message bar (empty when hidden).
  QString message_text() const;
  QWidget* message_bar() const { return message_bar_; }
  // Buttons shown in the message bar beside the current message (e.g. "Open another
  // database…" after a failed open); cleared by the next message.
  void add_message_action(const QString& label, std::function<void()> action);
  QList<QPushButton*> message_actions() const { return message_actions_; }
  // What closing during training asks; tests replace the dialog.
  void set_close_confirmation(std::function<bool()> confirm) { confirm_close_ = std::move(confirm); }
  // Stops a running training run, saving its checkpoint, and waits for the worker (bounded).
  void stop_training_and_wait();

 public slots:
  void start_training();
  // Starts the run a request describes (a new run, or one resumed from a checkpoint).
  void start_request(const snip::ui::TrainRequest& request);
  void toggle_pause();
  void stop_training();
  void show_message(snip::ui::MessageLevel level, const QString& text,
                    snip::ui::MessageSubject subject = snip::ui::MessageSubject::other);
  // Hides the message when it is about `subject` (a new attempt of it began).
  void settle_message(snip::ui::MessageSubject subject);

 signals:
  void run_ended(qint64 run_id, const QString& status, const QString& message);

 protected:
  void closeEvent(QCloseEvent* event) override;

 public:
  // Help › Documentation (F1): the README rendered in a window of the application.
  void show_documentation();
  QDialog* documentation_window() const { return docs_window_; }

 private:
  // The constructor's parts: the training worker's thread, the message bar, the views, the
  // layout around them, the connections.
  void start_worker_thread();
  void make_message_bar(QWidget* central);
  void make_views();
  void lay_out(QWidget* central);
  void connect_training_signals();
  void connect_view_signals();
  void connect_quick_start_signals();
  void build_menus();
  void open_database_dialog();
  void new_database_dialog();
  void update_database_status();
  void select_defaults();
  void ask_and_export(ExportKind kind);
  // The quick start's next stage after a run ended (or its end, with a message).
  void quick_start_run_ended(qint64 run_id, const QString& status);
  TrainRequest quick_start_request(const QString& name, const std::string& precision,
                                   const std::optional<snip::AdaptiveSettings>& adaptive) const;
  void offer_quick_start_on_an_empty_database();
  void export_chart(bool svg, const QString& path);
  void export_metrics_csv(const QString& path);
  // The message bar floats over the bottom of the views: showing or hiding it moves nothing.
  void place_message_bar();
  void save_settings();
  void restore_settings();

  Workbench* workbench_ = nullptr;
  std::shared_ptr<LiveMetrics> live_;
  QThread worker_thread_;
  TrainingWorker* worker_ = nullptr;
  bool paused_ = false;
  // A run is queued or training: set when this thread queues it, cleared when this thread
  // receives its run_ended (the worker's own busy flag clears later, after it emitted that).
  bool run_in_flight_ = false;
  enum class QuickStage { none, adaptive, uniform_fp4 };
  QuickStage quick_stage_ = QuickStage::none;
  QuickStartOptions quick_options_;
  std::vector<qint64> quick_runs_;
  std::function<bool()> confirm_close_;

  QTabWidget* tabs_ = nullptr;
  RunView* run_view_ = nullptr;
  MonitorView* monitor_view_ = nullptr;
  SensitivityView* sensitivity_view_ = nullptr;
  PlanView* plan_view_ = nullptr;
  CompareView* compare_view_ = nullptr;
  QWidget* message_bar_ = nullptr;
  QWidget* message_strip_ = nullptr;     // the message bar's place in the layout
  QPushButton* message_more_ = nullptr;  // "More…": the whole of a message longer than the strip
  MessageLevel message_level_ = MessageLevel::info;
  MessageSubject message_subject_ = MessageSubject::other;
  QDialog* docs_window_ = nullptr;  // Help › Documentation, made on first use
  QLabel* message_label_ = nullptr;
  QHBoxLayout* message_layout_ = nullptr;
  QList<QPushButton*> message_actions_;
  QTimer message_hide_timer_;
  QLabel* status_db_ = nullptr;
  QLabel* status_training_ = nullptr;
};

}  // namespace snip::ui
