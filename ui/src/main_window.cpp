// MainWindow: the window, its menus, the views and their wiring, the training worker's thread,
// the database dialogs and the window's settings. The rest of the class, by concern:
// message_bar.cpp, quick_start.cpp, exports.cpp, docs_viewer.cpp, screenshots.cpp.
#include "main_window.h"

#include <QCloseEvent>
#include <QCoreApplication>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFrame>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QVBoxLayout>

#include "compare_view.h"
#include "file_dialogs.h"
#include "monitor_view.h"
#include "plan_view.h"
#include "run_view.h"
#include "sensitivity_view.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/store.h"
#include "thread_priority.h"

namespace snip::ui {

QStringList MainWindow::view_names() {
  return {QStringLiteral("run"), QStringLiteral("monitor"), QStringLiteral("sensitivity"), QStringLiteral("plan"),
          QStringLiteral("compare")};
}

MainWindow::MainWindow(const QString& db_path, QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("SNIP Workbench"));
  workbench_ = new Workbench(this);
  live_ = std::make_shared<LiveMetrics>();
  start_worker_thread();

  auto* central = new QWidget(this);
  make_message_bar(central);
  make_views();
  lay_out(central);
  connect_training_signals();
  connect_view_signals();

  build_menus();
  resize(1280, 800);
  restore_settings();
  QString path = db_path;
  if (path.isEmpty()) {
    try {
      path = QString::fromStdString(snip::default_database_path());
    } catch (const std::exception& e) {  // e.g. the data directory cannot be created
      show_message(MessageLevel::error, tr("No default database: %1").arg(error_text(e)));
    }
  }
  if (!path.isEmpty()) workbench_->open_database(path);
  update_database_status();
}

void MainWindow::start_worker_thread() {
  // Worker on its own thread (Qt's worker-object recipe).
  worker_ = new TrainingWorker(live_);
  worker_->moveToThread(&worker_thread_);
  connect(&worker_thread_, &QThread::finished, worker_, &QObject::deleteLater);
  worker_thread_.setObjectName(QStringLiteral("snip-training"));
  // The worker's threads yield to the UI thread, which asks for a short slice (thread_priority.h).
  worker_thread_.start();
  request_short_ui_slice();
}

void MainWindow::make_views() {
  tabs_ = new QTabWidget(this);
  tabs_->setDocumentMode(true);
  run_view_ = new RunView(workbench_, this);
  monitor_view_ = new MonitorView(workbench_, live_, this);
  sensitivity_view_ = new SensitivityView(workbench_, this);
  plan_view_ = new PlanView(workbench_, this);
  compare_view_ = new CompareView(workbench_, this);
  // Each view scrolls when the window is smaller than the view's minimum: the window itself can
  // be made as small as a small screen (it could not go below 1158×682, off a 1024-wide screen).
  auto scrolled = [this](QWidget* view) {
    auto* area = new QScrollArea(this);
    area->setFrameShape(QFrame::NoFrame);
    area->setWidgetResizable(true);
    area->setWidget(view);
    return area;
  };
  tabs_->addTab(scrolled(run_view_), tr("&Run"));
  tabs_->addTab(scrolled(monitor_view_), tr("&Monitor"));
  tabs_->addTab(scrolled(sensitivity_view_), tr("&Sensitivity"));
  tabs_->addTab(scrolled(plan_view_), tr("&Plan"));
  tabs_->addTab(scrolled(compare_view_), tr("&Compare"));
}

// The views above the message strip, the status bar below.
void MainWindow::lay_out(QWidget* central) {
  auto* central_layout = new QVBoxLayout(central);
  central_layout->setContentsMargins(0, 0, 0, 0);
  central_layout->setSpacing(0);
  central_layout->addWidget(tabs_, 1);
  auto* strip_layout = new QVBoxLayout(message_strip_);
  strip_layout->setContentsMargins(0, 0, 0, 0);
  strip_layout->addWidget(message_bar_);
  {  // two lines of text beside a button: the strip's height whether or not a message is shown
    QPushButton probe(tr("Quick start"));
    const int text = 2 * message_label_->fontMetrics().lineSpacing();
    message_strip_->setFixedHeight(std::max(probe.sizeHint().height(), text) + 8 +
                                   2 * message_bar_->style()->pixelMetric(QStyle::PM_DefaultFrameWidth));
  }
  central_layout->addWidget(message_strip_);
  setCentralWidget(central);

  status_db_ = new QLabel(this);
  status_training_ = new QLabel(tr("idle"), this);
  statusBar()->addWidget(status_db_, 1);
  statusBar()->addPermanentWidget(status_training_);
}

void MainWindow::connect_training_signals() {
  // Run controls and worker signals.
  connect(run_view_, &RunView::start_requested, this, &MainWindow::start_training);
  connect(run_view_, &RunView::pause_toggled, this, &MainWindow::toggle_pause);
  connect(run_view_, &RunView::stop_requested, this, &MainWindow::stop_training);
  connect(run_view_, &RunView::resume_requested, this, &MainWindow::start_request);
  connect(run_view_, &RunView::monitor_requested, this, [this](qint64 id) {
    monitor_view_->show_run(id);
    show_view(QStringLiteral("monitor"));
  });
  connect(worker_, &TrainingWorker::run_started, this, [this](qint64 id) {
    status_training_->setText(tr("training run #%1").arg(id));
    emit workbench_->data_changed();
    monitor_view_->show_run(id);
  });
  connect(worker_, &TrainingWorker::progress, this, [this](const StepUpdate& u) {
    run_view_->show_progress(u);
    // Steps only: the throughput is the Run view's and the Monitor's (one figure, not two that
    // were sampled at different steps).
    status_training_->setText(tr("training run #%1 · step %2 of %3").arg(u.run_id).arg(u.step).arg(u.total_steps));
  });
  connect(worker_, &TrainingWorker::warning, this,
          [this](const QString& w) { show_message(MessageLevel::warning, w); });
  connect(worker_, &TrainingWorker::run_ended, this,
          [this](qint64 id, const QString& status, const QString& message, const QString& checkpoint) {
            run_in_flight_ = false;
            paused_ = false;
            run_view_->set_training(false);
            status_training_->setText(tr("idle"));
            if (status == QLatin1String("finished"))
              show_message(MessageLevel::info, tr("Run #%1 finished; checkpoint %2").arg(id).arg(checkpoint),
                           MessageSubject::training);
            else if (status == QLatin1String("interrupted"))
              show_message(MessageLevel::warning,
                           tr("Run #%1 stopped (%2); resumable from %3").arg(id).arg(message, checkpoint),
                           MessageSubject::training);
            else
              show_message(MessageLevel::error,
                           id > 0 ? tr("Run #%1 failed: %2").arg(id).arg(message)
                                  : tr("Training could not start: %1").arg(message),
                           MessageSubject::training);
            workbench_->poll_now();
            emit workbench_->data_changed();
            emit run_ended(id, status, message);
            if (quick_start_running()) quick_start_run_ended(id, status);
          });
}

// The views' signals to one another, and the database's.
void MainWindow::connect_view_signals() {
  connect_quick_start_signals();  // quick_start.cpp
  connect(plan_view_->lambda_spin(), &QDoubleSpinBox::valueChanged, sensitivity_view_, &SensitivityView::set_lambda);
  connect(sensitivity_view_, &SensitivityView::layer_clicked, this, [this](int layer) {
    plan_view_->cycle_pin(layer);
    show_message(MessageLevel::info,
                 tr("Pin changed in the Plan view (click the layer again to cycle FP8 → FP4 → none)"));
  });
  connect(workbench_, &Workbench::database_changed, this, [this] {
    update_database_status();
    select_defaults();
    offer_quick_start_on_an_empty_database();
  });
  // A database that cannot be opened: the message says why; these buttons offer the way on.
  connect(workbench_, &Workbench::database_open_failed, this, [this] {
    update_database_status();
    add_message_action(tr("Open another database…"), [this] { open_database_dialog(); });
    add_message_action(tr("New database…"), [this] { new_database_dialog(); });
  });
}

MainWindow::~MainWindow() {
  stop_training_and_wait();
  worker_thread_.quit();
  worker_thread_.wait();
}

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open database…"), QKeySequence::Open, this, &MainWindow::open_database_dialog);
  file->addAction(tr("&New database…"), QKeySequence::New, this, &MainWindow::new_database_dialog);
  file->addSeparator();
  file->addAction(tr("&Import statistics/costs…"), QKeySequence(tr("Ctrl+I")), this, [this] {
    const QString path = snip::ui::open_file_name(this, tr("Import statistics or costs"), {},
                                                  tr("Statistics or costs (*.json *.csv);;All files (*)"));
    if (!path.isEmpty()) workbench_->import_statistics_or_costs(path);
  });
  file->addAction(tr("Import &plan…"), this, [this] {
    const QString path = snip::ui::open_file_name(this, tr("Import a plan"), {}, tr("Plans (*.json)"));
    if (!path.isEmpty()) workbench_->import_plan(path);
  });
  file->addSeparator();
  file->addAction(tr("&Save plan to database"), QKeySequence::Save, this, [this] {
    try {
      show_message(MessageLevel::info, tr("Saved as plan #%1").arg(plan_view_->save_plan_to_store()));
    } catch (const std::exception& e) {
      show_message(MessageLevel::error, tr("Saving the plan failed: %1").arg(error_text(e)));
    }
  });
  file->addAction(tr("&Export plan as JSON…"), QKeySequence(tr("Ctrl+E")), this,
                  [this] { ask_and_export(ExportKind::plan_json); });
  file->addAction(tr("Export plan as &CSV…"), this, [this] { ask_and_export(ExportKind::plan_csv); });
  // The plan for the GPU training stacks (snip export --to): docs/FORMATS.md section 8.
  file->addAction(tr("Export plan for Megatron-LM (YAML)…"), this,
                  [this] { ask_and_export(ExportKind::plan_megatron); });
  file->addAction(tr("Export plan for Transformer Engine (JSON)…"), this,
                  [this] { ask_and_export(ExportKind::plan_te); });
  file->addAction(tr("Export plan for torchao (JSON)…"), this, [this] { ask_and_export(ExportKind::plan_torchao); });
  file->addAction(tr("Export chart as P&NG…"), this, [this] { ask_and_export(ExportKind::chart_png); });
  file->addAction(tr("Export chart as S&VG…"), this, [this] { ask_and_export(ExportKind::chart_svg); });
  file->addAction(tr("Export &metrics as CSV…"), this, [this] { ask_and_export(ExportKind::metrics_csv); });
  file->addAction(tr("Export comparison &table as CSV…"), this, [this] { ask_and_export(ExportKind::compare_csv); });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* run = menuBar()->addMenu(tr("&Training"));
  run->addAction(tr("&Start"), QKeySequence(tr("Ctrl+R")), this, &MainWindow::start_training);
  run->addAction(tr("&Pause / resume"), QKeySequence(tr("Ctrl+P")), this, &MainWindow::toggle_pause);
  run->addAction(tr("S&top (saves a checkpoint)"), QKeySequence(tr("Ctrl+.")), this, &MainWindow::stop_training);
  run->addAction(run_view_->resume_action());
  run->addSeparator();
  run->addAction(tr("&Quick start (train → statistics → plan → compare)"), this, [this] { start_quick_start(); });

  QMenu* view = menuBar()->addMenu(tr("&View"));
  const QStringList titles = {tr("Run"), tr("Monitor"), tr("Sensitivity"), tr("Plan"), tr("Compare")};
  for (int i = 0; i < titles.size(); ++i)
    view->addAction(titles[i], QKeySequence(QStringLiteral("Ctrl+%1").arg(i + 1)), this,
                    [this, i] { tabs_->setCurrentIndex(i); });
  // Ctrl+Tab / Ctrl+Shift+Tab cycle the views, as in browsers and other tabbed applications.
  QAction* next = view->addAction(tr("&Next view"), this,
                                  [this] { tabs_->setCurrentIndex((tabs_->currentIndex() + 1) % tabs_->count()); });
  next->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Tab)});
  QAction* previous = view->addAction(tr("P&revious view"), this, [this] {
    tabs_->setCurrentIndex((tabs_->currentIndex() + tabs_->count() - 1) % tabs_->count());
  });
  previous->setShortcuts(
      {QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Tab), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Backtab)});
  view->addSeparator();
  view->addAction(tr("&Refresh from database"), QKeySequence::Refresh, this, [this] {
    workbench_->poll_now();
    emit workbench_->data_changed();
  });

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* docs = help->addAction(tr("&Documentation (README)"), this, [this] { show_documentation(); });
  docs->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("&About SNIP Workbench"), this,
                  [this] { QMessageBox::about(this, tr("About SNIP Workbench"), about_text()); });
}

void MainWindow::select_defaults() {
  // Plan from the newest statistics round when nothing else is chosen; compare the two newest plans.
  snip::Store* store = workbench_->store();
  if (!store) return;
  try {
    workbench_->adopt_newest_round_if_none();
    // Compare: the two newest plans and the newest compare experiment, else the three newest
    // runs (a run's whole curve beside an experiment's arms would squeeze the arms into a sliver).
    std::vector<int64_t> plans, runs, compares;
    for (const auto& p : store->plans())
      if (plans.size() < 2) plans.push_back(p.id);
    const auto stored_compares = store->list_compares();
    if (!stored_compares.empty()) compares.push_back(stored_compares.front().id);
    for (const auto& r : store->runs())
      if (runs.size() < 3 && compares.empty()) runs.push_back(r.id);
    compare_view_->refresh_lists();
    compare_view_->select(plans, runs, compares);
  } catch (const std::exception& e) {
    show_message(MessageLevel::error, tr("Reading the database failed: %1").arg(error_text(e)));
  }
}

void MainWindow::open_database_dialog() {
  const QString path =
      snip::ui::open_file_name(this, tr("Open database"), QFileInfo(workbench_->database_path()).absolutePath(),
                               tr("SNIP databases (*.db *.sqlite);;All files (*)"));
  if (path.isEmpty()) return;
  if (training()) {
    show_message(MessageLevel::warning, tr("Stop the running training before opening another database"));
    return;
  }
  workbench_->open_database(path);
}

void MainWindow::new_database_dialog() {
  const QString start = workbench_->store() ? QFileInfo(workbench_->database_path()).absolutePath() : QDir::homePath();
  const QString path =
      snip::ui::save_file_name(this, tr("New database"), QDir(start).filePath(QStringLiteral("workbench.db")),
                               tr("SNIP databases (*.db *.sqlite);;All files (*)"), QFileDialog::DontConfirmOverwrite);
  if (path.isEmpty()) return;
  if (training()) {
    show_message(MessageLevel::warning, tr("Stop the running training before opening another database"));
    return;
  }
  // An existing file is opened, never overwritten: the store refuses one that is not a database.
  workbench_->open_database(path);
}

void MainWindow::update_database_status() {
  status_db_->setText(workbench_->store() ? tr("Database: %1").arg(workbench_->database_path())
                                          : tr("No database open — File › Open database… (Ctrl+O)"));
}

void MainWindow::show_view(const QString& name) {
  const int i = int(view_names().indexOf(name));
  if (i >= 0) tabs_->setCurrentIndex(i);
}

bool MainWindow::training() const {
  return run_in_flight_;
}

void MainWindow::start_training() {
  if (training()) {
    show_message(MessageLevel::warning, tr("A run is already training; stop it first (Ctrl+.)"));
    return;
  }
  if (!workbench_->store()) {
    show_message(MessageLevel::error, tr("No database is open: File › Open database"));
    return;
  }
  TrainRequest request;
  try {
    request = run_view_->make_request();
  } catch (const std::exception& e) {
    show_message(MessageLevel::error, tr("Cannot start: %1").arg(error_text(e)), MessageSubject::training);
    return;
  }
  start_request(request);
}

void MainWindow::start_request(const TrainRequest& request) {
  run_view_->save_settings();  // the form as it started a run is what the next launch shows
  if (training()) {
    show_message(MessageLevel::warning, tr("A run is already training; stop it first (Ctrl+.)"));
    return;
  }
  if (!workbench_->store()) {
    show_message(MessageLevel::error, tr("No database is open: File › Open database"));
    return;
  }
  paused_ = false;
  settle_message(MessageSubject::training);  // what the last attempt said no longer holds
  worker_->prepare(/*paused=*/false);
  run_in_flight_ = true;
  run_view_->set_training(true);
  status_training_->setText(tr("starting…"));
  TrainingWorker* worker = worker_;
  QMetaObject::invokeMethod(
      worker, [worker, request] { worker->run(request); }, Qt::QueuedConnection);
}

void MainWindow::toggle_pause() {
  if (!training()) return;
  paused_ = !paused_;
  worker_->set_paused(paused_);
  run_view_->set_training(true, paused_);
  status_training_->setText(paused_ ? tr("paused") : tr("training"));
}

void MainWindow::stop_training() {
  if (!training()) return;
  worker_->request_stop();
  status_training_->setText(tr("stopping after this step…"));
}

void MainWindow::stop_training_and_wait() {
  if (!worker_) return;
  worker_->request_stop();
  worker_thread_.requestInterruption();
  // The worker finishes its step and saves a checkpoint; run_ended arrives queued. A run still
  // queued behind this stop starts, sees it and ends at once, so both loops end.
  while (run_in_flight_ || worker_->busy()) {
    QCoreApplication::sendPostedEvents(this);
    if (run_in_flight_ || worker_->busy()) QThread::msleep(10);
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (compare_view_->experiment_running() && !training()) {
    const bool stop = confirm_close_
                          ? confirm_close_()
                          : QMessageBox::question(this, tr("A compare experiment is running"),
                                                  tr("Quitting stops the compare experiment after its current "
                                                     "step; its finished trainings are kept and Resume in the "
                                                     "Compare view continues it. Quit?")) == QMessageBox::Yes;
    if (!stop) {
      event->ignore();
      return;
    }
  }
  compare_view_->cancel_compare_experiment();
  if (training()) {
    const bool stop =
        confirm_close_
            ? confirm_close_()
            : QMessageBox::question(this, tr("Training is running"),
                                    tr("A run is training. Stop it, save a checkpoint and quit?")) == QMessageBox::Yes;
    if (!stop) {
      event->ignore();
      return;
    }
    status_training_->setText(tr("stopping and saving a checkpoint…"));
    stop_training_and_wait();
  }
  save_settings();
  event->accept();
}

void MainWindow::save_settings() {
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/state"), saveState());
  settings.setValue(QStringLiteral("window/tab"), tabs_->currentIndex());
  run_view_->save_settings();
}

void MainWindow::restore_settings() {
  QSettings settings;
  restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
  tabs_->setCurrentIndex(settings.value(QStringLiteral("window/tab"), 0).toInt());
}

}  // namespace snip::ui
