// MainWindow: menus, views, message bar, worker thread, settings and screenshots.
#include "main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QDialog>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QTextBrowser>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>

#include "compare_view.h"
#include "curve_chart.h"
#include "export_file.h"
#include "file_dialogs.h"
#include "heatmap_widget.h"
#include "monitor_view.h"
#include "plan_view.h"
#include "run_view.h"
#include "sensitivity_view.h"
#include "snip/atomic_file.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/isa.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "thread_priority.h"

namespace snip::ui {

namespace {
constexpr int kInfoMessageMs = 8000;  // info messages fade; warnings and errors stay until closed
}  // namespace

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

void MainWindow::make_message_bar(QWidget* central) {
  // Message bar: non-blocking, closable, in a strip of its own under the views whose height never
  // changes: two lines of text beside a button, whether or not a message is shown. So it never
  // covers a control (a bar floating over the views did) and a message coming and going never
  // moves a button under the mouse. A longer message shows its first lines and a "More…" button.
  message_strip_ = new QWidget(central);
  auto* bar_frame = new QFrame(message_strip_);
  bar_frame->setFrameStyle(QFrame::StyledPanel | QFrame::Raised);
  message_bar_ = bar_frame;
  message_bar_->setAutoFillBackground(true);
  auto* bar_layout = new QHBoxLayout(message_bar_);
  message_layout_ = bar_layout;
  bar_layout->setContentsMargins(8, 4, 4, 4);
  message_label_ = new QLabel(message_bar_);
  message_label_->setWordWrap(true);
  message_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* close_button = new QToolButton(message_bar_);
  close_button->setText(QStringLiteral("✕"));
  close_button->setAutoRaise(true);
  close_button->setToolTip(tr("Dismiss"));
  message_more_ = new QPushButton(tr("More…"), message_bar_);
  message_more_->setToolTip(tr("The whole message"));
  message_more_->hide();
  connect(message_more_, &QPushButton::clicked, this, [this] {
    QMessageBox box(message_level_ == MessageLevel::error     ? QMessageBox::Critical
                    : message_level_ == MessageLevel::warning ? QMessageBox::Warning
                                                              : QMessageBox::Information,
                    tr("SNIP Workbench"), message_label_->toolTip(), QMessageBox::Ok, this);
    box.setTextInteractionFlags(Qt::TextSelectableByMouse);
    box.exec();
  });
  bar_layout->addWidget(message_label_, 1);
  bar_layout->addWidget(message_more_);
  bar_layout->addWidget(close_button);
  message_bar_->hide();
  connect(close_button, &QToolButton::clicked, message_bar_, &QWidget::hide);
  message_hide_timer_.setSingleShot(true);
  connect(&message_hide_timer_, &QTimer::timeout, message_bar_, &QWidget::hide);
  connect(workbench_, &Workbench::message, this, &MainWindow::show_message);
  connect(workbench_, &Workbench::settled, this, &MainWindow::settle_message);
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
  // The quick start shows each new statistics round as the adaptive run makes it.
  connect(worker_, &TrainingWorker::plan_made, this, [this](qint64 run_id, qint64, qint64, double) {
    if (quick_stage_ != QuickStage::adaptive || !workbench_->store()) return;
    workbench_->poll_now();
    int64_t newest = 0;
    for (const auto& r : workbench_->store()->stats_rounds(run_id)) newest = std::max(newest, r.id);
    if (newest > 0) workbench_->use_stats_round(newest);
  });
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

void MainWindow::show_documentation() {
  const QString readme = readme_path();
  if (readme.isEmpty()) {
    show_message(MessageLevel::warning, tr("The README was not installed with this copy"));
    return;
  }
  // In the application: no browser or Markdown viewer is needed. Links to the other documents
  // (docs/*.md) open in the same window; web links in the desktop's browser, where there is one.
  if (!docs_window_) {
    docs_window_ = new QDialog(this, Qt::Window);
    docs_window_->setWindowTitle(tr("SNIP Workbench — documentation"));
    docs_window_->resize(900, 700);
    auto* browser = new QTextBrowser(docs_window_);
    browser->setObjectName(QStringLiteral("documentation"));
    browser->setOpenExternalLinks(true);
    auto* back = new QPushButton(tr("Back"), docs_window_);
    connect(back, &QPushButton::clicked, browser, &QTextBrowser::backward);
    connect(browser, &QTextBrowser::backwardAvailable, back, &QPushButton::setEnabled);
    back->setEnabled(false);
    auto* layout = new QVBoxLayout(docs_window_);
    layout->addWidget(back, 0, Qt::AlignLeft);
    layout->addWidget(browser, 1);
    browser->setSource(QUrl::fromLocalFile(readme), QTextDocument::MarkdownResource);
  }
  docs_window_->show();
  docs_window_->raise();
  docs_window_->activateWindow();
}

QString MainWindow::readme_path() {
  const QString installed = QDir(QCoreApplication::applicationDirPath())
                                .absoluteFilePath(QStringLiteral("../share/doc/snip-workbench/README.md"));
  for (const QString& candidate : {installed, QStringLiteral(SNIP_SOURCE_DIR "/README.md")})
    if (QFileInfo::exists(candidate)) return QDir::cleanPath(candidate);
  return {};
}

QString MainWindow::about_text() const {
  QString text = tr("<b>SNIP Workbench %1</b><br>FP8/FP4 mixed-precision Llama training on the CPU and the SNIP "
                    "planner (Pan et al., ASPLOS 2026).")
                     .arg(QStringLiteral(SNIP_VERSION));
  const QString readme = readme_path();
  if (!readme.isEmpty()) {
    const QString docs = QFileInfo(readme).absolutePath() + QStringLiteral("/docs");
    text += tr("<br><br>Documentation: <a href=\"%1\">README</a>")
                .arg(QUrl::fromLocalFile(readme).toString().toHtmlEscaped());
    if (QFileInfo(docs).isDir())
      text += tr(" · <a href=\"%1\">docs folder</a>").arg(QUrl::fromLocalFile(docs).toString().toHtmlEscaped());
    text += tr(" (F1 shows the README here)");
  }
  text += tr("<br><br>Database: %1")
              .arg(workbench_->store() ? workbench_->database_path().toHtmlEscaped() : tr("none open"));
  // The CPU and the kernel each precision runs on (the same lines as `snip info`).
  text += QStringLiteral("<br><br>") + QString::fromStdString(snip::isa_report())
                                           .toHtmlEscaped()
                                           .trimmed()
                                           .replace(QLatin1Char('\n'), QStringLiteral("<br>"));
  return text;
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

void MainWindow::add_message_action(const QString& label, std::function<void()> action) {
  auto* button = new QPushButton(label, message_bar_);
  // Before the close button.
  message_layout_->insertWidget(message_layout_->count() - 1, button);
  message_actions_.append(button);
  connect(button, &QPushButton::clicked, this, [action = std::move(action)] { action(); });
  place_message_bar();
}

void MainWindow::show_view(const QString& name) {
  const int i = int(view_names().indexOf(name));
  if (i >= 0) tabs_->setCurrentIndex(i);
}

bool MainWindow::training() const {
  return run_in_flight_;
}

QString MainWindow::message_text() const {
  return message_bar_->isVisible() ? message_label_->text() : QString();
}

void MainWindow::settle_message(MessageSubject subject) {
  if (subject != MessageSubject::other && message_subject_ == subject) {
    message_hide_timer_.stop();
    message_bar_->hide();
    message_subject_ = MessageSubject::other;
  }
}

void MainWindow::show_message(MessageLevel level, const QString& text_in, MessageSubject subject) {
  // Every message passes here, whoever made it (the worker, the store, a view): said in GUI terms.
  const QString text = gui_wording(text_in);
  QPalette pal = palette();
  QColor bg = pal.color(QPalette::AlternateBase);
  QString prefix;
  switch (level) {
    case MessageLevel::info:
      prefix = tr("ℹ ");
      break;
    case MessageLevel::warning:
      bg = QColor(255, 214, 102);
      prefix = tr("⚠ ");
      break;
    case MessageLevel::error:
      bg = QColor(240, 128, 128);
      prefix = tr("✖ ");
      break;
  }
  if (level != MessageLevel::info) {
    pal.setColor(QPalette::Window, bg);
    pal.setColor(QPalette::WindowText, Qt::black);
  } else {
    pal.setColor(QPalette::Window, pal.color(QPalette::AlternateBase));
  }
  message_bar_->setPalette(pal);
  message_label_->setPalette(pal);
  message_label_->setText(prefix + text);
  for (QPushButton* b : message_actions_) {
    b->hide();  // gone now, deleted when the event loop comes round
    b->deleteLater();
  }
  message_actions_.clear();
  message_label_->setToolTip(text);
  message_level_ = level;
  message_subject_ = subject;
  message_more_->hide();
  message_bar_->show();
  place_message_bar();
  // More than the strip's two lines: the whole text one click away.
  // (The label's own width is not laid out yet here: the room it gets beside the buttons.)
  const int room = std::max(message_strip_->width(), width()) - 8 -
                   message_more_->sizeHint().width() * (2 + int(message_actions_.size()));
  message_more_->setVisible(message_label_->heightForWidth(std::max(100, room)) >
                            2 * message_label_->fontMetrics().lineSpacing());
  if (level == MessageLevel::info)
    message_hide_timer_.start(kInfoMessageMs);
  else
    message_hide_timer_.stop();
}

void MainWindow::place_message_bar() {
  // In the layout: a new button or a longer text re-lays the strip at once (the offer of a quick
  // start on an empty database showed its button only after a resize when the bar floated).
  message_strip_->updateGeometry();
  if (QLayout* l = message_strip_->layout()) l->activate();
}

void MainWindow::offer_quick_start_on_an_empty_database() {
  try {
    // A read-only database cannot take a run: its read-only notice stays.
    if (!workbench_->store() || workbench_->store()->read_only() || !workbench_->store()->runs().empty()) return;
  } catch (const std::exception&) {
    return;
  }
  show_message(MessageLevel::info,
               tr("New here? Quick start trains a small model with SNIP on the bundled corpus, then with FP4 "
                  "everywhere, and compares them: under a minute, each view filling as it goes."));
  message_hide_timer_.stop();  // an offer stays until taken or dismissed
  add_message_action(tr("Quick start"), [this] { start_quick_start(); });
}

void MainWindow::start_quick_start(const QuickStartOptions& options) {
  if (training() || quick_start_running()) {
    show_message(MessageLevel::warning, tr("A run is already training; stop it first (Ctrl+.)"));
    return;
  }
  if (!workbench_->store()) {
    show_message(MessageLevel::error, tr("No database is open: File › Open database"));
    return;
  }
  quick_options_ = options;
  quick_runs_.clear();
  quick_stage_ = QuickStage::adaptive;
  // The loop's first stage: SNIP re-plans from a statistics round every replan_every steps.
  TrainRequest r;
  try {
    snip::AdaptiveSettings a;
    a.budget = options.budget;
    a.replan_every = options.replan_every;
    a.bf16_probe_every = std::max(1, options.replan_every / 4);
    r = quick_start_request(QStringLiteral("quick start · adaptive SNIP"), "bf16", a);
  } catch (const std::exception& e) {
    quick_stage_ = QuickStage::none;
    show_message(MessageLevel::error, tr("Quick start could not start: %1").arg(error_text(e)));
    return;
  }
  r.method = QStringLiteral("snip");
  show_view(QStringLiteral("monitor"));
  show_message(MessageLevel::info, tr("Quick start 1/2: training %1 with SNIP at %2 % FP4 (re-planned every %3 steps). "
                                      "Watch the loss in Monitor; Sensitivity and Plan fill at each statistics round.")
                                       .arg(options.preset)
                                       .arg(options.budget * 100.0, 0, 'f', 0)
                                       .arg(options.replan_every));
  start_request(r);
}

TrainRequest MainWindow::quick_start_request(const QString& name, const std::string& precision,
                                             const std::optional<snip::AdaptiveSettings>& adaptive) const {
  // The form's request (database, checkpoint folder), with the quick start's own run: the user's
  // form is left as it is, and every other setting is the default `snip train` takes.
  TrainRequest r = run_view_->make_quick_request();
  snip::RunSettings s;
  s.preset = quick_options_.preset.toStdString();
  s.data.clear();  // the bundled corpus
  s.steps = quick_options_.steps;
  s.batch_size = quick_options_.batch;
  s.seq_len = quick_options_.seq_len;
  s.eval_every = std::max(1, quick_options_.steps / 8);
  s.precision = precision;
  s.adaptive = adaptive;
  r.config = snip::train_config(s);
  if (adaptive) r.adaptive = snip::adaptive_options(*adaptive);
  r.run_name = name;
  r.plan_id.reset();
  return r;
}

void MainWindow::quick_start_run_ended(qint64 run_id, const QString& status) {
  if (status != QLatin1String("finished")) {
    quick_stage_ = QuickStage::none;
    show_message(
        MessageLevel::warning,
        tr("Quick start stopped (run #%1 %2); Training › Quick start begins it again.").arg(run_id).arg(status));
    return;
  }
  quick_runs_.push_back(run_id);
  if (quick_stage_ == QuickStage::adaptive) {
    // The baseline: the same model, data, seed and steps with every GEMM in FP4.
    quick_stage_ = QuickStage::uniform_fp4;
    TrainRequest r;
    try {
      r = quick_start_request(QStringLiteral("quick start · FP4 everywhere"), "fp4", std::nullopt);
    } catch (const std::exception& e) {
      quick_stage_ = QuickStage::none;
      show_message(MessageLevel::error, tr("Quick start could not go on: %1").arg(error_text(e)));
      return;
    }
    r.method = QStringLiteral("uniform-fp4");
    show_message(MessageLevel::info, tr("Quick start 2/2: the same run with FP4 everywhere, to compare against."));
    start_request(r);
    return;
  }
  quick_stage_ = QuickStage::none;
  // Both runs and the plans SNIP made in the Compare view.
  std::vector<int64_t> plans;
  try {
    for (const snip::PlanTimelineEntry& e : workbench_->store()->plan_timeline(quick_runs_.front()))
      if (plans.size() < 2) plans.push_back(e.plan_id);
  } catch (const std::exception&) {
  }
  compare_view_->refresh_lists();
  compare_view_->select(plans, {quick_runs_.begin(), quick_runs_.end()});
  show_view(QStringLiteral("compare"));
  show_message(MessageLevel::info,
               tr("Quick start done. Compare: SNIP's run (#%1, %2 % FP4) against FP4 everywhere (#%3), with SNIP's "
                  "first plans side by side. Next: Sensitivity shows which layers FP4 hurts most; in Plan, move the "
                  "FP4 budget and the ILP re-solves; Run trains your own.")
                   .arg(quick_runs_.front())
                   .arg(quick_options_.budget * 100.0, 0, 'f', 0)
                   .arg(quick_runs_.back()));
  message_hide_timer_.stop();  // what to look at next stays until dismissed
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

void MainWindow::ask_and_export(ExportKind kind) {
  const QString view = view_names().value(tabs_->currentIndex());
  QString name, filter;
  switch (kind) {
    case ExportKind::plan_json:
      name = QStringLiteral("plan.json"), filter = tr("Plans (*.json)");
      break;
    case ExportKind::plan_csv:
      name = QStringLiteral("plan.csv"), filter = tr("CSV (*.csv)");
      break;
    case ExportKind::plan_megatron:
      name = QStringLiteral("snip-precision.yaml"), filter = tr("Megatron-LM precision config (*.yaml *.yml)");
      break;
    case ExportKind::plan_te:
      name = QStringLiteral("plan.te.json"), filter = tr("Transformer Engine module map (*.json)");
      break;
    case ExportKind::plan_torchao:
      name = QStringLiteral("plan.torchao.json"), filter = tr("torchao module lists (*.json)");
      break;
    case ExportKind::chart_png:
      name = view + QStringLiteral(".png"), filter = tr("PNG (*.png)");
      break;
    case ExportKind::chart_svg:
      name = view + QStringLiteral(".svg"), filter = tr("SVG (*.svg)");
      break;
    case ExportKind::compare_csv:
      name = QStringLiteral("compare.csv"), filter = tr("CSV (*.csv)");
      break;
    case ExportKind::metrics_csv:
      if (monitor_view_->shown_run() == 0 || !workbench_->store()) {
        show_message(MessageLevel::warning, tr("Choose a run in the Monitor view first"));
        return;
      }
      name = QStringLiteral("run-%1.csv").arg(monitor_view_->shown_run()), filter = tr("CSV (*.csv)");
      break;
  }
  const QString path = snip::ui::save_file_name(this, tr("Export"), name, filter);
  if (!path.isEmpty()) export_to(kind, path);
}

bool MainWindow::export_to(ExportKind kind, const QString& path) {
  QString what;
  try {
    switch (kind) {
      case ExportKind::plan_json:
        what = tr("the plan"), plan_view_->export_plan_json(path);
        break;
      case ExportKind::plan_csv:
        what = tr("the plan"), plan_view_->export_plan_csv(path);
        break;
      case ExportKind::plan_megatron:
      case ExportKind::plan_te:
      case ExportKind::plan_torchao: {
        what = tr("the plan");
        const snip::PlanStack stack = kind == ExportKind::plan_megatron ? snip::PlanStack::megatron
                                      : kind == ExportKind::plan_te     ? snip::PlanStack::te
                                                                        : snip::PlanStack::torchao;
        const std::vector<std::string> warnings = plan_view_->export_plan_for(stack, path);
        if (!warnings.empty()) {
          show_message(MessageLevel::warning,
                       tr("Exported the plan to %1; %2")
                           .arg(QDir::toNativeSeparators(path), QString::fromStdString(warnings.front())));
          return true;
        }
        break;
      }
      case ExportKind::chart_png:
        what = tr("the chart"), export_chart(false, path);
        break;
      case ExportKind::chart_svg:
        what = tr("the chart"), export_chart(true, path);
        break;
      case ExportKind::metrics_csv:
        what = tr("the metrics"), export_metrics_csv(path);
        break;
      case ExportKind::compare_csv:
        what = tr("the comparison table"), compare_view_->export_table_csv(path);
        break;
    }
  } catch (const std::exception& e) {
    show_message(MessageLevel::error, tr("Exporting %1 failed: %2").arg(what, error_text(e)));
    return false;
  }
  show_message(MessageLevel::info, tr("Exported %1 to %2").arg(what, QDir::toNativeSeparators(path)));
  return true;
}

void MainWindow::export_chart(bool svg, const QString& path) {
  const QString view = view_names().value(tabs_->currentIndex());
  CurveChart* chart = nullptr;
  if (view == QLatin1String("monitor")) chart = monitor_view_->loss_chart();
  if (view == QLatin1String("plan")) chart = plan_view_->tradeoff_chart();
  if (view == QLatin1String("compare")) chart = compare_view_->loss_chart();
  if (chart) {
    svg ? chart->export_svg(path) : chart->export_png(path);
    return;
  }
  QWidget* w = view == QLatin1String("sensitivity") ? static_cast<QWidget*>(sensitivity_view_->heatmap())
                                                    : tabs_->currentWidget();
  if (svg)
    write_svg_file(
        w->size(), view, [&](QPainter& painter) { w->render(&painter); }, path);
  else
    write_png_file(w->grab(), path);
}

void MainWindow::export_metrics_csv(const QString& path) {
  const int64_t run_id = monitor_view_->shown_run();
  if (run_id == 0 || !workbench_->store()) throw snip::Error("no run is shown: choose a run in the Monitor view first");
  std::string csv = "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,fp4_fraction,bf16_gap\n";
  auto opt = [](const std::optional<double>& v) {
    return v ? QString::number(*v, 'g', 9).toStdString() : std::string();
  };
  for (const snip::MetricRow& m : workbench_->store()->metrics(run_id))
    csv += std::to_string(m.step) + "," + QString::number(m.train_loss, 'g', 9).toStdString() + "," + opt(m.val_loss) +
           "," + QString::number(m.lr, 'g', 9).toStdString() + "," +
           QString::number(m.grad_norm, 'g', 9).toStdString() + "," +
           QString::number(m.tokens_per_s, 'g', 9).toStdString() + "," +
           QString::number(m.fp4_fraction, 'g', 9).toStdString() + "," + opt(m.bf16_gap) + "\n";
  snip::write_file_atomic(path.toStdString(), csv);
}

QStringList MainWindow::render_screenshots(const QString& dir) {
  if (!QDir().mkpath(dir)) throw snip::Error("cannot create the screenshot folder " + dir.toStdString());
  QStringList written;
  const int previous = tabs_->currentIndex();
  const QStringList names = view_names();
  for (int i = 0; i < names.size(); ++i) {
    tabs_->setCurrentIndex(i);
    QCoreApplication::processEvents();
    // Charts redraw on timers; draw them now so the image shows the data.
    for (CurveChart* c : tabs_->widget(i)->findChildren<CurveChart*>()) c->redraw_now();
    QCoreApplication::processEvents();
    // A view with pages of its own (the Monitor's curves and gradient noise): <view>.png is its
    // first page, <view>-<page>.png each other page, whichever page the user left open.
    const QList<QTabWidget*> page_sets = tabs_->widget(i)->findChildren<QTabWidget*>();
    std::vector<int> shown;
    for (QTabWidget* pages : page_sets) {
      shown.push_back(pages->currentIndex());
      pages->setCurrentIndex(0);
    }
    QCoreApplication::processEvents();
    const QString path = QDir(dir).filePath(names[i] + QStringLiteral(".png"));
    write_png_file(grab(), path);
    written << path;
    for (int k = 0; k < page_sets.size(); ++k) {
      QTabWidget* pages = page_sets[k];
      for (int page = 1; page < pages->count(); ++page) {
        if (pages->widget(page)->objectName().isEmpty()) continue;
        pages->setCurrentIndex(page);
        QCoreApplication::processEvents();
        const QString page_path = QDir(dir).filePath(names[i] + QLatin1Char('-') + pages->widget(page)->objectName() +
                                                     QStringLiteral(".png"));
        write_png_file(grab(), page_path);
        written << page_path;
      }
      pages->setCurrentIndex(shown[size_t(k)]);
    }
  }
  tabs_->setCurrentIndex(previous);
  return written;
}

}  // namespace snip::ui
