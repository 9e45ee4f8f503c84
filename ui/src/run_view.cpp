// RunView: the run form, run controls with progress, and the table of stored runs.
#include "run_view.h"

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStyle>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "file_dialogs.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/recipe_name.h"
#include "snip/recorded_training.h"
#include "snip/store_export.h"
#include "workbench.h"

namespace snip::ui {

namespace {
enum PrecisionChoice { kBf16 = 0, kFp8, kFp4, kFp32, kPlanFile, kStoredPlan, kAdaptive };
constexpr int kStatusRole = Qt::UserRole + 1;  // runs table: the run's snip::RunStatus

QString format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return QStringLiteral("—");
  const qint64 s = qint64(seconds + 0.5);
  if (s >= 3600) return QStringLiteral("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
  if (s >= 60) return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QStringLiteral("%1 s").arg(s);
}

QLineEdit* path_row(QWidget* parent, QFormLayout* form, const QString& label, const QString& placeholder,
                    const QString& filter) {
  auto* edit = new QLineEdit(parent);
  edit->setPlaceholderText(placeholder);
  auto* browse = new QPushButton(QObject::tr("Browse…"), parent);
  QObject::connect(browse, &QPushButton::clicked, parent, [edit, parent, filter] {
    const QString path = snip::ui::open_file_name(parent, QObject::tr("Choose a file"), {}, filter);
    if (!path.isEmpty()) edit->setText(path);
  });
  auto* row = new QHBoxLayout();
  row->addWidget(edit, 1);
  row->addWidget(browse);
  form->addRow(label, row);
  return edit;
}
}  // namespace

RunView::RunView(Workbench* workbench, QWidget* parent) : QWidget(parent), workbench_(workbench) {
  QGroupBox* box = make_run_box();
  QGroupBox* runs_box = make_runs_box();
  // The form scrolls when "More settings" makes it taller than the window.
  auto* form_scroll = new QScrollArea(this);
  form_scroll->setWidget(box);
  form_scroll->setWidgetResizable(true);
  form_scroll->setFrameShape(QFrame::NoFrame);
  form_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  const int scrollbar = style()->pixelMetric(QStyle::PM_ScrollBarExtent);
  form_scroll->setMinimumWidth(std::max(box->minimumWidth(), box->sizeHint().width()) + scrollbar);
  form_scroll->setMaximumWidth(box->maximumWidth() + scrollbar);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(form_scroll);
  layout->addWidget(runs_box, 1);
  connect_signals();
  restore_settings();
  fit_seq_to_model();
  update_source_enabled();
  connect(workbench_, &Workbench::data_changed, this, &RunView::refresh_runs);
  set_training(false);
  refresh_runs();
}

// The "New training run" box: what to train, how, and the run's controls.
QGroupBox* RunView::make_run_box() {
  auto* box = new QGroupBox(tr("New training run"), this);
  auto* form = new QFormLayout(box);
  add_model_rows(box, form);
  form->addRow(tr("Adaptive:"), make_adaptive_box(box));
  add_training_rows(box, form);
  auto* more_toggle = new QToolButton(box);
  more_toggle->setText(tr("More settings"));
  more_toggle->setCheckable(true);
  more_toggle->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  more_toggle->setArrowType(Qt::RightArrow);
  more_toggle->setAutoRaise(true);
  form->addRow(more_toggle);
  form->addRow(make_more_box(box));
  more_box_->setVisible(false);
  connect(more_toggle, &QToolButton::toggled, this, [this, more_toggle](bool on) {
    more_toggle->setArrowType(on ? Qt::DownArrow : Qt::RightArrow);
    more_box_->setVisible(on);
  });
  add_control_rows(box, form);
  box->setMinimumWidth(420);
  box->setMaximumWidth(560);
  return box;
}

// Name, model, data, recipe and precision.
void RunView::add_model_rows(QGroupBox* box, QFormLayout* form) {
  name_edit_ = new QLineEdit(box);
  name_edit_->setPlaceholderText(tr("automatic (preset · precision · seed)"));
  form->addRow(tr("Name:"), name_edit_);
  preset_combo_ = new QComboBox(box);
  preset_combo_->setObjectName(QStringLiteral("preset"));
  for (const std::string& p : snip::preset_names()) {
    if (p == "tinyllama-1.1b") continue;  // a planning shape, not trained here
    preset_combo_->addItem(QString::fromStdString(p));
  }
  preset_combo_->setCurrentText(QString::fromLatin1(snip::defaults::kPreset));
  form->addRow(tr("Model preset:"), preset_combo_);
  config_edit_ = path_row(box, form, tr("…or config.json:"), tr("optional: a Hugging Face Llama config.json"),
                          tr("JSON (*.json)"));
  data_edit_ = path_row(box, form, tr("Data:"), tr("bundled corpus (King James Bible)"),
                        tr("Text or token files (*.txt *.bin);;All files (*)"));
  recipe_combo_ = new QComboBox(box);
  // The named recipes and a few points of the granularity family between them; any other name
  // the engine accepts can be typed (checked when the run starts).
  recipe_combo_->addItems({QStringLiteral("snip"), QStringLiteral("mx"), QStringLiteral("nvfp4"),
                           QStringLiteral("tensor"), QStringLiteral("block:32"), QStringLiteral("block:row"),
                           QStringLiteral("channel"), QStringLiteral("tensor:sr")});
  recipe_combo_->setEditable(true);
  recipe_combo_->setToolTip(tr("Scaling recipe of the quantized GEMMs (docs/FORMATS.md): %1")
                                .arg(QString::fromUtf8(snip::recipe_name_forms())));
  form->addRow(tr("Recipe:"), recipe_combo_);
  precision_combo_ = new QComboBox(box);
  precision_combo_->addItems({tr("BF16 everywhere"), tr("FP8 everywhere"), tr("FP4 everywhere"),
                              tr("FP32 (no quantization)"), tr("Plan file…"), tr("Stored plan"),
                              tr("Adaptive (re-plan during training)")});
  form->addRow(tr("Precision:"), precision_combo_);
}

QWidget* RunView::make_adaptive_box(QWidget* parent) {
  // Adaptive re-planning (METHOD.md 9): a statistics round + a plan by the chosen method every N
  // steps at the FP4 budget; λ and the round's options as `snip train --method ...` takes them.
  adaptive_box_ = new QWidget(parent);
  auto* adaptive_grid = new QGridLayout(adaptive_box_);
  adaptive_grid->setContentsMargins(0, 0, 0, 0);
  adaptive_method_ = new QComboBox(adaptive_box_);
  // The methods that re-make a plan from each round (uniform-* and fp4-<role>-only never change).
  for (snip::Method m : snip::kAllMethods) {
    const QString name = QString::fromLatin1(snip::method_name(m));
    if (!name.startsWith(QLatin1String("uniform")) && !name.endsWith(QLatin1String("-only")))
      adaptive_method_->addItem(name);
  }
  adaptive_method_->setToolTip(tr("How each round's plan is made: SNIP's ILP on Q = ΔL̂ + λ·ΔŴ, or a baseline"));
  adaptive_lambda_ = new QDoubleSpinBox(adaptive_box_);
  adaptive_lambda_->setRange(0.0, 10.0);
  adaptive_lambda_->setDecimals(3);
  adaptive_lambda_->setSingleStep(0.05);
  adaptive_lambda_->setValue(snip::defaults::kLambda);
  adaptive_lambda_->setToolTip(tr("λ in Q = ΔL̂ + λ·ΔŴ (λ = 1 is not neutral)"));
  adaptive_budget_ = new QDoubleSpinBox(adaptive_box_);
  adaptive_budget_->setRange(0.0, 100.0);
  adaptive_budget_->setDecimals(1);
  adaptive_budget_->setValue(100.0 * snip::defaults::kBudget);
  adaptive_budget_->setSuffix(QStringLiteral(" %"));
  adaptive_budget_->setToolTip(tr("FP4 FLOP fraction ρ every plan must reach"));
  adaptive_replan_ = new QSpinBox(adaptive_box_);
  adaptive_replan_->setRange(0, 1000000);
  adaptive_replan_->setValue(int(snip::defaults::kReplanEvery));
  adaptive_replan_->setToolTip(tr("Steps between statistics rounds and re-solves (0: plan once at the start)"));
  adaptive_probe_ = new QSpinBox(adaptive_box_);
  adaptive_probe_->setRange(0, 1000000);
  adaptive_probe_->setValue(int(snip::defaults::kBf16ProbeEvery));
  adaptive_probe_->setToolTip(tr("Steps between BF16 probes: the live loss gap to a BF16 forward (0: never)"));
  const snip::StatsRoundOptions round_defaults;
  adaptive_noise_passes_ = new QSpinBox(adaptive_box_);
  adaptive_noise_passes_->setRange(1, 64);
  adaptive_noise_passes_->setValue(round_defaults.noise_passes);
  adaptive_noise_passes_->setToolTip(tr("Statistics round: backward-noise passes and forward-noise pairs (each)"));
  adaptive_sigma_ = new QDoubleSpinBox(adaptive_box_);
  adaptive_sigma_->setDecimals(4);
  adaptive_sigma_->setRange(1e-4, 1.0);
  adaptive_sigma_->setSingleStep(0.005);
  adaptive_sigma_->setValue(round_defaults.sigma_eta_rel);
  adaptive_sigma_->setToolTip(tr("Statistics round: injected noise σ_η relative to the RMS of the activations"));
  adaptive_ties_ = new QCheckBox(tr("tie q/k/v, gate/up"), adaptive_box_);
  adaptive_ties_->setToolTip(tr("One precision for q/k/v and one for gate/up of a block (fused kernels)"));
  adaptive_per_role_ = new QCheckBox(tr("per role"), adaptive_box_);
  adaptive_per_role_->setToolTip(tr("Choose fprop and the backward GEMMs (dgrad, wgrad) separately"));
  add_noise_monitor_fields();
  adaptive_grid->addWidget(new QLabel(tr("method"), adaptive_box_), 0, 0);
  adaptive_grid->addWidget(adaptive_method_, 0, 1);
  adaptive_grid->addWidget(new QLabel(tr("λ"), adaptive_box_), 0, 2);
  adaptive_grid->addWidget(adaptive_lambda_, 0, 3);
  adaptive_grid->addWidget(new QLabel(tr("ρ"), adaptive_box_), 0, 4);
  adaptive_grid->addWidget(adaptive_budget_, 0, 5);
  adaptive_grid->addWidget(new QLabel(tr("re-plan every"), adaptive_box_), 1, 0);
  adaptive_grid->addWidget(adaptive_replan_, 1, 1);
  adaptive_grid->addWidget(new QLabel(tr("BF16 probe every"), adaptive_box_), 1, 2, 1, 3);
  adaptive_grid->addWidget(adaptive_probe_, 1, 5);
  adaptive_grid->addWidget(new QLabel(tr("noise passes"), adaptive_box_), 2, 0);
  adaptive_grid->addWidget(adaptive_noise_passes_, 2, 1);
  adaptive_grid->addWidget(new QLabel(tr("σ_η"), adaptive_box_), 2, 2);
  adaptive_grid->addWidget(adaptive_sigma_, 2, 3);
  adaptive_grid->addWidget(adaptive_ties_, 3, 0, 1, 3);
  adaptive_grid->addWidget(adaptive_per_role_, 3, 3, 1, 3);
  adaptive_grid->addWidget(new QLabel(tr("re-plan when"), adaptive_box_), 4, 0);
  adaptive_grid->addWidget(adaptive_replan_when_, 4, 1, 1, 2);
  adaptive_grid->addWidget(new QLabel(tr("noise floor"), adaptive_box_), 4, 3, 1, 2);
  adaptive_grid->addWidget(adaptive_noise_floor_, 4, 5);
  return adaptive_box_;
}

// The gradient noise monitor's fields (METHOD.md 10), as `snip train --replan-when` and `--noise-floor`.
void RunView::add_noise_monitor_fields() {
  adaptive_replan_when_ = new QComboBox(adaptive_box_);
  adaptive_replan_when_->addItem(tr("every round"), QStringLiteral("always"));
  adaptive_replan_when_->addItem(tr("FP4 noise crosses √3"), QStringLiteral("noise"));
  adaptive_replan_when_->setToolTip(
      tr("Re-solve at every statistics round, or only when the set of layers whose FP4 gradient noise ratio "
         "‖∇W‖/‖∇W_q − ∇W‖ is below √3 (or the noise floor) changes"));
  adaptive_noise_floor_ = new QDoubleSpinBox(adaptive_box_);
  adaptive_noise_floor_->setObjectName(QStringLiteral("noise_floor"));
  adaptive_noise_floor_->setRange(0.0, 100.0);
  adaptive_noise_floor_->setDecimals(3);
  adaptive_noise_floor_->setSingleStep(0.1);
  adaptive_noise_floor_->setSpecialValueText(tr("off"));
  adaptive_noise_floor_->setValue(0.0);
  adaptive_noise_floor_->setToolTip(
      tr("Layers whose FP4 gradient noise ratio is below this stay out of FP4 (the "
         "budget is lowered when it must be, and said); √3 ≈ 1.732; 0: off"));
}

// The rest of what `snip train` takes: tokenizer, accumulation, schedule, AdamW, clipping and
// evaluation batches, each at its default (snip/defaults.h).
QWidget* RunView::make_more_box(QWidget* parent) {
  more_box_ = new QWidget(parent);
  auto* form = new QFormLayout(more_box_);
  form->setContentsMargins(0, 0, 0, 0);
  tokenizer_edit_ = path_row(more_box_, form, tr("Tokenizer:"), tr("byte (vocab 256), or a SentencePiece .model"),
                             tr("SentencePiece models (*.model);;All files (*)"));
  auto spin = [&](int lo, int hi, int value, const QString& special = {}) {
    auto* b = new QSpinBox(more_box_);
    b->setRange(lo, hi);
    b->setValue(value);
    if (!special.isEmpty()) b->setSpecialValueText(special);
    return b;
  };
  auto dspin = [&](double lo, double hi, double value, int decimals, const QString& special = {}) {
    auto* b = new QDoubleSpinBox(more_box_);
    b->setDecimals(decimals);
    b->setRange(lo, hi);
    b->setValue(value);
    b->setSingleStep(std::pow(10.0, -decimals + 1));
    if (!special.isEmpty()) b->setSpecialValueText(special);
    return b;
  };
  const snip::RunSettings d;
  grad_accum_spin_ = spin(1, 4096, d.grad_accum);
  eval_batches_spin_ = spin(1, 100000, d.eval_batches);
  auto* accum_row = new QHBoxLayout();
  accum_row->addWidget(grad_accum_spin_);
  accum_row->addWidget(new QLabel(tr("eval batches"), more_box_));
  accum_row->addWidget(eval_batches_spin_);
  form->addRow(tr("Grad accumulation:"), accum_row);
  schedule_combo_ = new QComboBox(more_box_);
  schedule_combo_->addItems({QStringLiteral("cosine"), QStringLiteral("constant")});
  warmup_spin_ = spin(-1, 10000000, -1, tr("auto"));
  warmup_spin_->setToolTip(
      tr("Linear warmup steps; auto: %1, or the whole run when it is shorter").arg(snip::defaults::kWarmup));
  lr_min_spin_ = dspin(-1.0, 1.0, -1.0, 6, tr("peak / %1").arg(snip::defaults::kLrMinDivisor));
  auto* schedule_row = new QHBoxLayout();
  schedule_row->addWidget(schedule_combo_);
  schedule_row->addWidget(new QLabel(tr("warmup"), more_box_));
  schedule_row->addWidget(warmup_spin_);
  schedule_row->addWidget(new QLabel(tr("final LR"), more_box_));
  schedule_row->addWidget(lr_min_spin_);
  form->addRow(tr("Schedule:"), schedule_row);
  weight_decay_spin_ = dspin(0.0, 10.0, d.weight_decay, 4);
  beta1_spin_ = dspin(0.0, 0.9999, d.beta1, 4);
  beta2_spin_ = dspin(0.0, 0.99999, d.beta2, 5);
  clip_spin_ = dspin(0.0, 1000.0, d.clip, 3, tr("off"));
  auto* adam_row = new QHBoxLayout();
  adam_row->addWidget(new QLabel(tr("β1"), more_box_));
  adam_row->addWidget(beta1_spin_);
  adam_row->addWidget(new QLabel(tr("β2"), more_box_));
  adam_row->addWidget(beta2_spin_);
  adam_row->addWidget(new QLabel(tr("decay"), more_box_));
  adam_row->addWidget(weight_decay_spin_);
  form->addRow(tr("AdamW:"), adam_row);
  form->addRow(tr("Clip grad norm:"), clip_spin_);
  return more_box_;
}

// The plan sources, steps, shape, learning rate, seed and the evaluation/checkpoint intervals.
void RunView::add_training_rows(QGroupBox* box, QFormLayout* form) {
  plan_edit_ = path_row(box, form, tr("Plan file:"), tr("snip-plan/1 JSON (with “Plan file…”)"), tr("Plans (*.json)"));
  stored_plan_combo_ = new QComboBox(box);
  form->addRow(tr("Stored plan:"), stored_plan_combo_);
  steps_spin_ = new QSpinBox(box);
  steps_spin_->setObjectName(QStringLiteral("steps"));
  steps_spin_->setRange(1, 10000000);
  steps_spin_->setValue(int(snip::defaults::kTrainSteps));
  form->addRow(tr("Steps:"), steps_spin_);
  auto* shape_row = new QHBoxLayout();
  batch_spin_ = new QSpinBox(box);
  batch_spin_->setRange(1, 4096);
  batch_spin_->setValue(snip::defaults::kBatchSize);
  seq_spin_ = new QSpinBox(box);
  seq_spin_->setObjectName(QStringLiteral("seq_len"));
  seq_spin_->setRange(2, 65536);
  seq_spin_->setValue(snip::defaults::kSeqLen);
  shape_row->addWidget(new QLabel(tr("batch B"), box));
  shape_row->addWidget(batch_spin_);
  shape_row->addWidget(new QLabel(tr("seq len T"), box));
  shape_row->addWidget(seq_spin_);

  form->addRow(tr("Shape:"), shape_row);
  // Beside the box's row, full width: says when (and why) T was lowered; hidden otherwise.
  seq_note_ = new QLabel(box);
  seq_note_->setWordWrap(true);
  seq_note_->setStyleSheet(QStringLiteral("color: #b05a00"));
  seq_note_->hide();
  form->addRow(QString(), seq_note_);
  lr_spin_ = new QDoubleSpinBox(box);
  lr_spin_->setDecimals(5);
  lr_spin_->setRange(1e-6, 1.0);
  lr_spin_->setSingleStep(1e-4);
  lr_spin_->setValue(snip::defaults::kLearningRate);
  form->addRow(tr("Peak LR (cosine):"), lr_spin_);
  seed_spin_ = new QSpinBox(box);
  seed_spin_->setRange(0, 2147483647);
  seed_spin_->setValue(int(snip::defaults::kSeed));
  form->addRow(tr("Seed:"), seed_spin_);
  auto* every_row = new QHBoxLayout();
  eval_spin_ = new QSpinBox(box);
  eval_spin_->setRange(0, 1000000);
  eval_spin_->setValue(int(snip::defaults::kEvalEvery));
  save_spin_ = new QSpinBox(box);
  save_spin_->setRange(0, 1000000);
  save_spin_->setValue(0);
  every_row->addWidget(new QLabel(tr("eval every"), box));
  every_row->addWidget(eval_spin_);
  every_row->addWidget(new QLabel(tr("checkpoint every"), box));
  every_row->addWidget(save_spin_);
  form->addRow(tr("Steps between:"), every_row);
}

// Start, pause, stop, resume and the progress bar.
void RunView::add_control_rows(QGroupBox* box, QFormLayout* form) {
  start_button_ = new QPushButton(tr("Start"), box);
  start_button_->setObjectName(QStringLiteral("start"));
  start_button_->setToolTip(tr("Start training (Ctrl+R)"));
  pause_button_ = new QPushButton(tr("Pause"), box);
  pause_button_->setObjectName(QStringLiteral("pause"));
  pause_button_->setToolTip(tr("Pause / resume between steps (Ctrl+P)"));
  stop_button_ = new QPushButton(tr("Stop"), box);
  stop_button_->setObjectName(QStringLiteral("stop"));
  stop_button_->setToolTip(tr("Stop after this step and save a checkpoint (Ctrl+.)"));
  resume_button_ = new QPushButton(tr("Resume from checkpoint…"), box);
  resume_button_->setObjectName(QStringLiteral("resume_checkpoint"));
  resume_button_->setToolTip(
      tr("Continue a run saved in a checkpoint directory, exactly where it stopped (Ctrl+Shift+R)"));
  resume_action_ = new QAction(tr("Resume from &checkpoint…"), this);
  resume_action_->setShortcut(QKeySequence(tr("Ctrl+Shift+R")));
  resume_action_->setToolTip(resume_button_->toolTip());
  auto* buttons = new QHBoxLayout();
  buttons->addWidget(start_button_);
  buttons->addWidget(pause_button_);
  buttons->addWidget(stop_button_);
  buttons->addWidget(resume_button_);
  form->addRow(buttons);
  progress_ = new QProgressBar(box);
  progress_->setObjectName(QStringLiteral("progress"));
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_label_ = new QLabel(tr("idle"), box);
  form->addRow(progress_);
  form->addRow(progress_label_);
}

// The runs of the database, with "Resume selected run".
QGroupBox* RunView::make_runs_box() {
  runs_table_ = new QTableWidget(this);
  runs_table_->setObjectName(QStringLiteral("runs"));
  runs_table_->setColumnCount(8);
  runs_table_->setHorizontalHeaderLabels(
      {tr("Run"), tr("Name"), tr("Status"), tr("Steps"), tr("Method"), tr("Recipe"), tr("Last loss"), tr("Started")});
  runs_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  runs_table_->horizontalHeader()->setStretchLastSection(true);
  runs_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  runs_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  runs_table_->verticalHeader()->setVisible(false);
  auto* runs_box = new QGroupBox(tr("Runs in this database (also those made by the snip command)"), this);
  auto* runs_layout = new QVBoxLayout(runs_box);
  runs_layout->addWidget(runs_table_);
  resume_run_button_ = new QPushButton(tr("Resume selected run"), runs_box);
  resume_run_button_->setObjectName(QStringLiteral("resume_run"));
  resume_run_button_->setToolTip(tr("Continue a stopped or interrupted run from its newest checkpoint"));
  auto* runs_buttons = new QHBoxLayout();
  runs_buttons->addStretch(1);
  runs_buttons->addWidget(resume_run_button_);
  runs_layout->addLayout(runs_buttons);
  return runs_box;
}

void RunView::connect_signals() {
  connect(start_button_, &QPushButton::clicked, this, &RunView::start_requested);
  connect(pause_button_, &QPushButton::clicked, this, &RunView::pause_toggled);
  connect(stop_button_, &QPushButton::clicked, this, &RunView::stop_requested);
  connect(resume_button_, &QPushButton::clicked, this, &RunView::choose_checkpoint_and_resume);
  connect(resume_action_, &QAction::triggered, this, &RunView::choose_checkpoint_and_resume);
  connect(resume_run_button_, &QPushButton::clicked, this, &RunView::resume_selected_run);
  connect(runs_table_, &QTableWidget::itemSelectionChanged, this, &RunView::update_resume_enabled);
  connect(runs_table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (auto* item = runs_table_->item(row, 0)) emit monitor_requested(item->data(Qt::UserRole).toLongLong());
  });
  connect(precision_combo_, &QComboBox::currentIndexChanged, this, &RunView::update_source_enabled);
  // A preset fixes the longest sequence. The box's own range stays wide: a maximum of 64 made
  // the box swallow the third digit of a typed 128 (leaving 12). T is checked when typing ends
  // or the model changes, and lowered with a note beside the box saying why.
  connect(preset_combo_, &QComboBox::currentIndexChanged, this, &RunView::fit_seq_to_model);
  connect(seq_spin_, &QSpinBox::editingFinished, this, &RunView::fit_seq_to_model);
  connect(seq_spin_, &QSpinBox::valueChanged, this, [this] {
    seq_note_->clear();
    seq_note_->hide();
  });
}

// The plan file, stored plan and adaptive rows are live only for their precision choice.
void RunView::update_source_enabled() {
  const int p = precision_combo_->currentIndex();
  plan_edit_->setEnabled(p == kPlanFile);
  stored_plan_combo_->setEnabled(p == kStoredPlan);
  adaptive_box_->setEnabled(p == kAdaptive);
}

void RunView::fit_seq_to_model() {
  int cap = 0;
  QString model = preset_combo_->currentText();
  try {
    const QString config = config_edit_->text().trimmed();
    const snip::ModelConfig c =
        config.isEmpty() ? snip::preset_config(model.toStdString()) : snip::read_config_file(config.toStdString());
    if (!config.isEmpty()) model = QFileInfo(config).fileName();
    cap = c.max_position_embeddings;
  } catch (const std::exception&) {
    return;  // an unreadable config.json is reported when the run starts
  }
  if (cap <= 0 || seq_spin_->value() <= cap) return;
  const int asked = seq_spin_->value();
  {
    const QSignalBlocker block(seq_spin_);  // the note below must survive this change
    seq_spin_->setValue(cap);
  }
  seq_note_->setText(tr("⚠ T lowered from %1 to %2: the longest sequence %3 takes").arg(asked).arg(cap).arg(model));
  seq_note_->show();
}

QString RunView::seq_note() const {
  return seq_note_->text();
}

void RunView::save_settings() const {
  QSettings s;
  s.beginGroup(QStringLiteral("run_form"));
  s.setValue(QStringLiteral("preset"), preset_combo_->currentText());
  s.setValue(QStringLiteral("config"), config_edit_->text());
  s.setValue(QStringLiteral("data"), data_edit_->text());
  s.setValue(QStringLiteral("recipe"), recipe_combo_->currentText());
  s.setValue(QStringLiteral("precision"), precision_combo_->currentIndex());
  s.setValue(QStringLiteral("plan_file"), plan_edit_->text());
  s.setValue(QStringLiteral("steps"), steps_spin_->value());
  s.setValue(QStringLiteral("batch"), batch_spin_->value());
  s.setValue(QStringLiteral("seq_len"), seq_spin_->value());
  s.setValue(QStringLiteral("lr"), lr_spin_->value());
  s.setValue(QStringLiteral("seed"), seed_spin_->value());
  s.setValue(QStringLiteral("eval_every"), eval_spin_->value());
  s.setValue(QStringLiteral("checkpoint_every"), save_spin_->value());
  s.setValue(QStringLiteral("adaptive/method"), adaptive_method_->currentText());
  s.setValue(QStringLiteral("adaptive/lambda"), adaptive_lambda_->value());
  s.setValue(QStringLiteral("adaptive/budget_percent"), adaptive_budget_->value());
  s.setValue(QStringLiteral("adaptive/replan_every"), adaptive_replan_->value());
  s.setValue(QStringLiteral("adaptive/bf16_probe_every"), adaptive_probe_->value());
  s.setValue(QStringLiteral("adaptive/noise_passes"), adaptive_noise_passes_->value());
  s.setValue(QStringLiteral("adaptive/sigma_eta_rel"), adaptive_sigma_->value());
  s.setValue(QStringLiteral("adaptive/ties"), adaptive_ties_->isChecked());
  s.setValue(QStringLiteral("adaptive/per_role"), adaptive_per_role_->isChecked());
  s.setValue(QStringLiteral("adaptive/replan_when"), adaptive_replan_when_->currentIndex());
  s.setValue(QStringLiteral("adaptive/noise_floor"), adaptive_noise_floor_->value());
  s.setValue(QStringLiteral("more/tokenizer"), tokenizer_edit_->text());
  s.setValue(QStringLiteral("more/grad_accum"), grad_accum_spin_->value());
  s.setValue(QStringLiteral("more/eval_batches"), eval_batches_spin_->value());
  s.setValue(QStringLiteral("more/schedule"), schedule_combo_->currentText());
  s.setValue(QStringLiteral("more/warmup"), warmup_spin_->value());
  s.setValue(QStringLiteral("more/lr_min"), lr_min_spin_->value());
  s.setValue(QStringLiteral("more/weight_decay"), weight_decay_spin_->value());
  s.setValue(QStringLiteral("more/beta1"), beta1_spin_->value());
  s.setValue(QStringLiteral("more/beta2"), beta2_spin_->value());
  s.setValue(QStringLiteral("more/clip"), clip_spin_->value());
}

void RunView::restore_settings() {
  // Each value only when stored and valid for its widget (a preset that no longer exists, an
  // out-of-range number from an older version): the default stays otherwise.
  QSettings s;
  s.beginGroup(QStringLiteral("run_form"));
  auto combo = [&](QComboBox* c, const char* key) {
    const QString v = s.value(QLatin1String(key)).toString();
    if (!v.isEmpty() && (c->isEditable() || c->findText(v) >= 0)) c->setCurrentText(v);
  };
  auto index = [&](QComboBox* c, const char* key) {
    bool ok = false;
    const int i = s.value(QLatin1String(key)).toInt(&ok);
    if (ok && i >= 0 && i < c->count()) c->setCurrentIndex(i);
  };
  auto spin = [&](QSpinBox* b, const char* key) {
    bool ok = false;
    const int v = s.value(QLatin1String(key)).toInt(&ok);
    if (ok && v >= b->minimum() && v <= b->maximum()) b->setValue(v);
  };
  auto dspin = [&](QDoubleSpinBox* b, const char* key) {
    bool ok = false;
    const double v = s.value(QLatin1String(key)).toDouble(&ok);
    if (ok && v >= b->minimum() && v <= b->maximum()) b->setValue(v);
  };
  auto text = [&](QLineEdit* e, const char* key) {
    if (s.contains(QLatin1String(key))) e->setText(s.value(QLatin1String(key)).toString());
  };
  auto check = [&](QCheckBox* c, const char* key) {
    if (s.contains(QLatin1String(key))) c->setChecked(s.value(QLatin1String(key)).toBool());
  };
  combo(preset_combo_, "preset");
  text(config_edit_, "config");
  text(data_edit_, "data");
  combo(recipe_combo_, "recipe");
  index(precision_combo_, "precision");
  text(plan_edit_, "plan_file");
  spin(steps_spin_, "steps");
  spin(batch_spin_, "batch");
  spin(seq_spin_, "seq_len");
  dspin(lr_spin_, "lr");
  spin(seed_spin_, "seed");
  spin(eval_spin_, "eval_every");
  spin(save_spin_, "checkpoint_every");
  combo(adaptive_method_, "adaptive/method");
  dspin(adaptive_lambda_, "adaptive/lambda");
  dspin(adaptive_budget_, "adaptive/budget_percent");
  spin(adaptive_replan_, "adaptive/replan_every");
  spin(adaptive_probe_, "adaptive/bf16_probe_every");
  spin(adaptive_noise_passes_, "adaptive/noise_passes");
  dspin(adaptive_sigma_, "adaptive/sigma_eta_rel");
  check(adaptive_ties_, "adaptive/ties");
  check(adaptive_per_role_, "adaptive/per_role");
  index(adaptive_replan_when_, "adaptive/replan_when");
  dspin(adaptive_noise_floor_, "adaptive/noise_floor");
  text(tokenizer_edit_, "more/tokenizer");
  spin(grad_accum_spin_, "more/grad_accum");
  spin(eval_batches_spin_, "more/eval_batches");
  combo(schedule_combo_, "more/schedule");
  spin(warmup_spin_, "more/warmup");
  dspin(lr_min_spin_, "more/lr_min");
  dspin(weight_decay_spin_, "more/weight_decay");
  dspin(beta1_spin_, "more/beta1");
  dspin(beta2_spin_, "more/beta2");
  dspin(clip_spin_, "more/clip");
}

void RunView::set_training(bool training, bool paused) {
  training_ = training;
  start_button_->setEnabled(!training);
  resume_button_->setEnabled(!training);
  resume_action_->setEnabled(!training);
  update_resume_enabled();
  pause_button_->setEnabled(training);
  stop_button_->setEnabled(training);
  pause_button_->setText(paused ? tr("Resume") : tr("Pause"));
  if (!training) progress_label_->setText(tr("idle"));
}

void RunView::show_progress(const StepUpdate& u) {
  progress_->setRange(0, int(std::min<qint64>(u.total_steps, 1 << 30)));
  progress_->setValue(int(std::min<qint64>(u.step, 1 << 30)));
  progress_label_->setText(tr("run #%1 · step %2 / %3 · loss %4 · %5 tokens/s · ETA %6")
                               .arg(u.run_id)
                               .arg(u.step)
                               .arg(u.total_steps)
                               .arg(u.train_loss, 0, 'f', 4)
                               .arg(u.tokens_per_s, 0, 'f', 0)
                               .arg(format_duration(u.eta_s)));
}

// The run the form gives, the precision aside (BF16 until apply_precision_choice).
snip::RunSettings RunView::form_settings() const {
  snip::RunSettings s;
  s.config_path = config_edit_->text().trimmed().toStdString();
  if (s.config_path.empty()) s.preset = preset_combo_->currentText().toStdString();
  s.data = data_edit_->text().trimmed().toStdString();
  const QString tokenizer = tokenizer_edit_->text().trimmed();
  s.tokenizer = tokenizer.isEmpty() ? "byte" : tokenizer.toStdString();
  s.recipe = recipe_combo_->currentText().trimmed().toStdString();
  s.steps = steps_spin_->value();
  s.batch_size = batch_spin_->value();
  s.seq_len = seq_spin_->value();
  s.grad_accum = grad_accum_spin_->value();
  s.lr = lr_spin_->value();
  s.lr_min = lr_min_spin_->value();
  s.warmup = warmup_spin_->value();
  s.schedule = schedule_combo_->currentText().toStdString();
  s.weight_decay = weight_decay_spin_->value();
  s.beta1 = beta1_spin_->value();
  s.beta2 = beta2_spin_->value();
  s.clip = clip_spin_->value();
  s.seed = uint64_t(seed_spin_->value());
  s.eval_every = eval_spin_->value();
  s.eval_batches = eval_batches_spin_->value();
  return s;
}

snip::RunSettings RunView::run_settings() const {
  snip::RunSettings s = form_settings();
  TrainRequest ignored;
  apply_precision_choice(s, ignored);
  return s;
}

void RunView::set_run_settings(const snip::RunSettings& s) {
  config_edit_->setText(QString::fromStdString(s.config_path));
  data_edit_->setText(QString::fromStdString(s.data));
  tokenizer_edit_->setText(s.tokenizer == "byte" ? QString() : QString::fromStdString(s.tokenizer));
  recipe_combo_->setCurrentText(QString::fromStdString(s.recipe));
  steps_spin_->setValue(int(std::min<int64_t>(s.steps, steps_spin_->maximum())));
  batch_spin_->setValue(s.batch_size);
  if (s.seq_len > 0) seq_spin_->setValue(s.seq_len);
  grad_accum_spin_->setValue(s.grad_accum);
  lr_spin_->setValue(s.lr);
  lr_min_spin_->setValue(s.lr_min < 0 ? -1.0 : s.lr_min);
  warmup_spin_->setValue(int(std::clamp<int64_t>(s.warmup, -1, warmup_spin_->maximum())));
  schedule_combo_->setCurrentText(QString::fromStdString(s.schedule));
  weight_decay_spin_->setValue(s.weight_decay);
  beta1_spin_->setValue(s.beta1);
  beta2_spin_->setValue(s.beta2);
  clip_spin_->setValue(s.clip);
  seed_spin_->setValue(int(s.seed));
  eval_spin_->setValue(int(s.eval_every));
  eval_batches_spin_->setValue(s.eval_batches);
  if (s.adaptive) set_adaptive_settings(*s.adaptive);
  set_precision_choice(s);
  // The model last: a preset that takes shorter sequences lowers T, saying so, as choosing it does.
  if (!s.preset.empty()) preset_combo_->setCurrentText(QString::fromStdString(s.preset));
}

void RunView::set_adaptive_settings(const snip::AdaptiveSettings& a) {
  adaptive_method_->setCurrentText(QString::fromStdString(a.method));
  adaptive_budget_->setValue(100.0 * a.budget);
  adaptive_replan_->setValue(int(a.replan_every));
  adaptive_probe_->setValue(int(a.bf16_probe_every));
  adaptive_lambda_->setValue(a.lambda);
  adaptive_ties_->setChecked(a.ties);
  adaptive_per_role_->setChecked(a.per_role);
  adaptive_replan_when_->setCurrentIndex(adaptive_replan_when_->findData(QString::fromStdString(a.replan_when)));
  adaptive_noise_floor_->setValue(a.noise_floor);
  adaptive_noise_passes_->setValue(a.noise_passes);
  adaptive_sigma_->setValue(a.sigma_eta_rel);
}

// Adaptive when the settings re-plan, else their uniform precision; a plan stays the form's choice
// (a plan file or a stored plan: the settings hold the plan, not where it came from).
void RunView::set_precision_choice(const snip::RunSettings& s) {
  if (s.adaptive) {
    precision_combo_->setCurrentIndex(kAdaptive);
    return;
  }
  if (s.plan) return;
  static const char* const names[] = {"bf16", "fp8", "fp4", "fp32"};
  for (int i = kBf16; i <= kFp32; ++i)
    if (s.precision == names[i]) precision_combo_->setCurrentIndex(i);
}

snip::AdaptiveSettings RunView::adaptive_settings() const {
  snip::AdaptiveSettings a;
  a.method = adaptive_method_->currentText().toStdString();
  a.budget = adaptive_budget_->value() / 100.0;
  a.ties = adaptive_ties_->isChecked();
  a.per_role = adaptive_per_role_->isChecked();
  a.replan_every = adaptive_replan_->value();
  a.bf16_probe_every = adaptive_probe_->value();
  a.lambda = adaptive_lambda_->value();
  a.noise_passes = adaptive_noise_passes_->value();
  a.sigma_eta_rel = adaptive_sigma_->value();
  a.replan_when = adaptive_replan_when_->currentData().toString().toStdString();
  a.noise_floor = adaptive_noise_floor_->value();
  return a;
}

// The precision choice: a uniform precision, a plan (file or stored) or adaptive planning.
void RunView::apply_precision_choice(snip::RunSettings& s, TrainRequest& r) const {
  switch (precision_combo_->currentIndex()) {
    case kBf16:
    case kFp8:
    case kFp4:
    case kFp32: {
      static const char* const names[] = {"bf16", "fp8", "fp4", "fp32"};
      s.precision = names[precision_combo_->currentIndex()];
      r.method = s.precision == "fp32" ? QStringLiteral("fp32") : QStringLiteral("uniform-") + s.precision.c_str();
      break;
    }
    case kPlanFile: {
      const QString path = plan_edit_->text().trimmed();
      if (path.isEmpty()) throw snip::Error("precision “Plan file…” needs a plan: choose a snip-plan/1 JSON file");
      s.plan = snip::read_plan_file(path.toStdString());
      r.method = QString::fromStdString(s.plan->method.empty() ? "plan" : s.plan->method);
      break;
    }
    case kStoredPlan: {
      const qlonglong id = stored_plan_combo_->currentData().toLongLong();
      if (id <= 0 || !workbench_->store())
        throw snip::Error("no stored plan selected: make one in the Plan view first");
      s.plan = workbench_->store()->plan(id).plan;
      r.plan_id = id;
      r.method = QString::fromStdString(s.plan->method.empty() ? "plan" : s.plan->method);
      break;
    }
    case kAdaptive: {
      s.adaptive = adaptive_settings();
      r.method = adaptive_method_->currentText();
      break;
    }
    default:
      throw snip::Error("unknown precision choice");
  }
}

TrainRequest RunView::make_request() const {
  TrainRequest r;
  snip::RunSettings s = form_settings();
  apply_precision_choice(s, r);
  r.config = snip::train_config(s);
  if (s.adaptive) r.adaptive = snip::adaptive_options(*s.adaptive);
  r.run_name = name_edit_->text().trimmed();
  if (r.run_name.isEmpty())
    r.run_name = QStringLiteral("%1 · %2 · seed %3")
                     .arg(config_edit_->text().isEmpty() ? preset_combo_->currentText()
                                                         : QFileInfo(config_edit_->text()).baseName(),
                          r.method)
                     .arg(r.config.seed);
  r.db_path = workbench_->database_path();
  r.checkpoint_root = QString::fromStdString(snip::checkpoint_root_of_database(r.db_path.toStdString()));
  r.save_every = save_spin_->value();
  return r;
}

TrainRequest RunView::make_quick_request() const {
  TrainRequest r;
  r.db_path = workbench_->database_path();
  r.checkpoint_root = QString::fromStdString(snip::checkpoint_root_of_database(r.db_path.toStdString()));
  return r;
}

void RunView::refresh_runs() {
  snip::Store* store = workbench_->store();
  if (!store) return;
  std::vector<snip::RunInfo> runs;
  std::vector<snip::PlanRecord> plans;
  try {
    runs = store->runs();
    plans = store->plans();
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Reading runs failed: %1").arg(error_text(e)));
    return;
  }
  runs_table_->setRowCount(int(runs.size()));
  for (int i = 0; i < int(runs.size()); ++i) {
    const snip::RunInfo& r = runs[size_t(i)];
    QString last_loss = QStringLiteral("—");
    if (r.last_step >= 0) {
      try {
        const auto rows = store->metrics(r.id, r.last_step, r.last_step);
        if (!rows.empty()) last_loss = QString::number(rows.back().train_loss, 'f', 4);
      } catch (const std::exception&) {
      }
    }
    const QString cells[] = {QString::number(r.id),
                             QString::fromStdString(snip::printable_text(r.spec.name)),
                             QString::fromLatin1(snip::run_status_name(r.status)),
                             QString::number(r.last_step < 0 ? 0 : r.last_step),
                             QString::fromStdString(r.spec.method),
                             QString::fromStdString(r.spec.recipe),
                             last_loss,
                             QDateTime::fromMSecsSinceEpoch(r.started_ms).toString(QStringLiteral("yyyy-MM-dd hh:mm"))};
    for (int c = 0; c < 8; ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c == 0) {
        item->setData(Qt::UserRole, qlonglong(r.id));
        item->setData(kStatusRole, int(r.status));
      }
      if (!r.status_message.empty()) item->setToolTip(QString::fromStdString(r.status_message));
      runs_table_->setItem(i, c, item);
    }
  }
  const qlonglong selected = stored_plan_combo_->currentData().toLongLong();
  const QSignalBlocker block(stored_plan_combo_);
  stored_plan_combo_->clear();
  for (const snip::PlanRecord& p : plans)
    stored_plan_combo_->addItem(tr("plan #%1 · %2 · ρ %3")
                                    .arg(p.id)
                                    .arg(QString::fromStdString(p.plan.method))
                                    .arg(p.plan.achieved_fp4_fraction, 0, 'f', 3),
                                qlonglong(p.id));
  stored_plan_combo_->setCurrentIndex(std::max(0, stored_plan_combo_->findData(selected)));
  update_resume_enabled();
}

QList<RunView::ListedRun> RunView::listed_runs() const {
  QList<ListedRun> runs;
  for (int row = 0; row < runs_table_->rowCount(); ++row) {
    const QTableWidgetItem* id_item = runs_table_->item(row, 0);
    const QTableWidgetItem* name_item = runs_table_->item(row, 1);
    if (id_item)
      runs.append({id_item->data(Qt::UserRole).toLongLong(), name_item ? name_item->text() : QString(),
                   QString::fromLatin1(snip::run_status_name(snip::RunStatus(id_item->data(kStatusRole).toInt())))});
  }
  return runs;
}

bool RunView::select_run(qint64 run_id) {
  for (int row = 0; row < runs_table_->rowCount(); ++row)
    if (const QTableWidgetItem* id_item = runs_table_->item(row, 0);
        id_item && id_item->data(Qt::UserRole).toLongLong() == run_id) {
      runs_table_->selectRow(row);
      return true;
    }
  return false;
}

qint64 RunView::selected_run() const {
  const QList<QTableWidgetItem*> items = runs_table_->selectedItems();
  if (items.isEmpty()) return 0;
  const QTableWidgetItem* id_item = runs_table_->item(items.front()->row(), 0);
  return id_item ? id_item->data(Qt::UserRole).toLongLong() : 0;
}

void RunView::update_resume_enabled() {
  // A run that stopped before its end (by the user, Ctrl-C, a crash or an engine error) can go on.
  bool resumable = false;
  const QList<QTableWidgetItem*> items = runs_table_->selectedItems();
  if (!items.isEmpty())
    if (const QTableWidgetItem* id_item = runs_table_->item(items.front()->row(), 0)) {
      const auto status = snip::RunStatus(id_item->data(kStatusRole).toInt());
      resumable = status == snip::RunStatus::interrupted || status == snip::RunStatus::failed;
    }
  resume_run_button_->setEnabled(resumable && !training_);
}

TrainRequest RunView::make_resume_request(const QString& checkpoint_dir) const {
  TrainRequest r;
  r.resume_from = checkpoint_dir;
  r.db_path = workbench_->database_path();
  r.checkpoint_root = QString::fromStdString(snip::checkpoint_root_of_database(r.db_path.toStdString()));
  r.run_name = QStringLiteral("resumed · %1").arg(QFileInfo(checkpoint_dir).fileName());
  // A checkpoint of an adaptive run of this database goes on re-planning with that run's settings.
  if (snip::Store* store = workbench_->store()) {
    if (const std::optional<int64_t> id = snip::find_run_of_checkpoint(*store, checkpoint_dir.toStdString())) {
      const snip::RunInfo run = store->run(*id);
      r.run_name = QString::fromStdString(snip::printable_text(run.spec.name));
      if (run.spec.train_config.contains("adaptive"))
        r.adaptive = snip::adaptive_options_from_json(run.spec.train_config["adaptive"],
                                                      "run " + std::to_string(run.id) + " (adaptive settings)");
    }
  }
  return r;
}

TrainRequest RunView::make_resume_request_for_run(qint64 run_id) const {
  snip::Store* store = workbench_->store();
  if (!store) throw snip::Error("no database is open");
  const std::vector<snip::Checkpoint> checkpoints = store->checkpoints(run_id);
  if (checkpoints.empty())
    throw snip::Error("run " + std::to_string(run_id) +
                      " saved no checkpoint, so it cannot be resumed: start it again as a new run");
  return make_resume_request(QString::fromStdString(checkpoints.back().path));  // the newest step
}

void RunView::choose_checkpoint_and_resume() {
  if (training_) return;
  const QString dir = snip::ui::existing_directory(
      this, tr("Resume from checkpoint"),
      QString::fromStdString(snip::checkpoint_root_of_database(workbench_->database_path().toStdString())));
  if (!dir.isEmpty()) resume_from_checkpoint(dir);
}

void RunView::resume_from_checkpoint(const QString& checkpoint_dir) {
  try {
    emit resume_requested(make_resume_request(checkpoint_dir));
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Cannot resume: %1").arg(error_text(e)));
  }
}

void RunView::resume_selected_run() {
  const qint64 run_id = selected_run();
  if (run_id == 0 || training_) return;
  try {
    emit resume_requested(make_resume_request_for_run(run_id));
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Cannot resume run #%1: %2").arg(run_id).arg(error_text(e)));
  }
}

}  // namespace snip::ui
