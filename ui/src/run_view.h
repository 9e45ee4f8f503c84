// The Run view: choose a preset or config file, data (the bundled corpus by default), recipe,
// precision (uniform BF16/FP8/FP4/FP32, a plan file, a stored plan, or adaptive re-planning with
// its method, λ, budget, intervals and statistics-round options), steps, seed, batch and
// learning rate; start, pause/resume and stop (stop saves a checkpoint); resume a run from a
// checkpoint directory or a stopped run from the table (it continues its exact trajectory in the
// run that saved it); a progress bar with ETA and tokens/s; and the table of every run in the
// database (double-click to monitor one).
#pragma once
#include <QWidget>
#include <optional>

#include "snip/run_settings.h"
#include "training_worker.h"

class QAction;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QGroupBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace snip::ui {

class Workbench;

class RunView : public QWidget {
  Q_OBJECT
 public:
  RunView(Workbench* workbench, QWidget* parent = nullptr);

  // The request the form describes; throws snip::Error for an invalid form (bad config file, ...).
  TrainRequest make_request() const;
  // A request that reads nothing of the form (the quick start sets its own run): the open
  // database and its checkpoint folder, as make_request sets them.
  TrainRequest make_quick_request() const;
  // Continuing the run saved in `checkpoint_dir`: its settings come from the checkpoint (and, for
  // an adaptive run of this database, its stored adaptive settings); checkpoint interval from the
  // form. A missing or corrupt directory is reported by the worker when it starts.
  TrainRequest make_resume_request(const QString& checkpoint_dir) const;
  // Continuing stored run `run_id` from its newest checkpoint; throws snip::Error when it has none.
  TrainRequest make_resume_request_for_run(qint64 run_id) const;

  // The run the form describes, as `snip train`'s options describe one (snip/run_settings.h),
  // with the form's precision choice; throws snip::Error when the chosen plan cannot be read.
  snip::RunSettings run_settings() const;
  // The form set from a run's settings, its precision choice too: Adaptive when `s.adaptive` is
  // set, else `s.precision` everywhere (with `s.plan`, the plan file or stored plan chosen stays).
  // The model is set last: a preset taking shorter sequences lowers T, saying so (seq_note()).
  void set_run_settings(const snip::RunSettings& s);
  // The form's adaptive re-planning settings, whichever precision is chosen (what Adaptive runs).
  snip::AdaptiveSettings adaptive_settings() const;
  // The runs table, in its order (newest first), and selecting a run in it as a click on its row
  // does (false when it is not listed).
  struct ListedRun {
    qint64 id = 0;
    QString name;
    QString status;  // snip::run_status_name
  };
  QList<ListedRun> listed_runs() const;
  bool select_run(qint64 run_id);
  // Training › Resume from checkpoint… (the main window's menu holds it).
  QAction* resume_action() const { return resume_action_; }
  // The controls a user acts on are found by object name: "start", "pause", "stop",
  // "resume_checkpoint", "resume_run", "preset", "steps", "seq_len", "noise_floor", "progress",
  // "runs".

  // The form's settings persist between launches (QSettings, group "run_form"): saved when a
  // run starts and when the window closes, restored when the view is made.
  void save_settings() const;
  void restore_settings();
  // The note beside the sequence-length box (empty when T fits the model).
  QString seq_note() const;

  void set_training(bool training, bool paused = false);
  qint64 selected_run() const;  // 0: none
  void show_progress(const StepUpdate& u);

 signals:
  void start_requested();
  void pause_toggled();
  void stop_requested();
  void monitor_requested(qint64 run_id);
  void resume_requested(const snip::ui::TrainRequest& request);

 public slots:
  void refresh_runs();
  // Asks for a checkpoint directory, then emits resume_requested.
  void choose_checkpoint_and_resume();
  void resume_from_checkpoint(const QString& checkpoint_dir);
  // The run selected in the table, from its newest checkpoint.
  void resume_selected_run();

 private:
  // make_request's parts: the run's settings without its precision, and the precision choice.
  snip::RunSettings form_settings() const;
  void apply_precision_choice(snip::RunSettings& s, TrainRequest& r) const;
  // set_run_settings' parts.
  void set_adaptive_settings(const snip::AdaptiveSettings& a);
  void set_precision_choice(const snip::RunSettings& s);
  // The constructor's parts: one function per group box (and row group), then the connections.
  QGroupBox* make_run_box();
  void add_model_rows(QGroupBox* box, QFormLayout* form);
  QWidget* make_adaptive_box(QWidget* parent);
  void add_noise_monitor_fields();
  QWidget* make_more_box(QWidget* parent);
  void add_training_rows(QGroupBox* box, QFormLayout* form);
  void add_control_rows(QGroupBox* box, QFormLayout* form);
  QGroupBox* make_runs_box();
  void connect_signals();
  void update_source_enabled();
  void update_resume_enabled();
  // Keeps T within the model's longest sequence, saying so beside the box when it lowers it.
  void fit_seq_to_model();

  Workbench* workbench_;
  QComboBox* preset_combo_ = nullptr;
  QLineEdit* config_edit_ = nullptr;
  QLineEdit* data_edit_ = nullptr;
  QComboBox* recipe_combo_ = nullptr;
  QComboBox* precision_combo_ = nullptr;
  QLineEdit* plan_edit_ = nullptr;
  QComboBox* stored_plan_combo_ = nullptr;
  QSpinBox* steps_spin_ = nullptr;
  QSpinBox* seed_spin_ = nullptr;
  QSpinBox* batch_spin_ = nullptr;
  QSpinBox* seq_spin_ = nullptr;
  QLabel* seq_note_ = nullptr;
  QDoubleSpinBox* lr_spin_ = nullptr;
  QSpinBox* eval_spin_ = nullptr;
  QSpinBox* save_spin_ = nullptr;
  QLineEdit* name_edit_ = nullptr;
  // "More settings": the rest of what `snip train` takes.
  QWidget* more_box_ = nullptr;
  QLineEdit* tokenizer_edit_ = nullptr;
  QSpinBox* grad_accum_spin_ = nullptr;
  QSpinBox* warmup_spin_ = nullptr;        // -1: the default, within the run
  QDoubleSpinBox* lr_min_spin_ = nullptr;  // -1: lr / 10
  QComboBox* schedule_combo_ = nullptr;
  QDoubleSpinBox* weight_decay_spin_ = nullptr;
  QDoubleSpinBox* beta1_spin_ = nullptr;
  QDoubleSpinBox* beta2_spin_ = nullptr;
  QDoubleSpinBox* clip_spin_ = nullptr;
  QSpinBox* eval_batches_spin_ = nullptr;
  QWidget* adaptive_box_ = nullptr;
  QDoubleSpinBox* adaptive_budget_ = nullptr;
  QSpinBox* adaptive_replan_ = nullptr;
  QSpinBox* adaptive_probe_ = nullptr;
  QDoubleSpinBox* adaptive_lambda_ = nullptr;
  QComboBox* adaptive_method_ = nullptr;
  QSpinBox* adaptive_noise_passes_ = nullptr;
  QDoubleSpinBox* adaptive_sigma_ = nullptr;
  QCheckBox* adaptive_ties_ = nullptr;
  QCheckBox* adaptive_per_role_ = nullptr;
  QComboBox* adaptive_replan_when_ = nullptr;
  QDoubleSpinBox* adaptive_noise_floor_ = nullptr;
  QPushButton* resume_button_ = nullptr;
  QPushButton* resume_run_button_ = nullptr;
  QAction* resume_action_ = nullptr;
  bool training_ = false;
  QPushButton* start_button_ = nullptr;
  QPushButton* pause_button_ = nullptr;
  QPushButton* stop_button_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* progress_label_ = nullptr;
  QTableWidget* runs_table_ = nullptr;
};

}  // namespace snip::ui
