// The Run view: choose a preset or config file, data (the bundled corpus by default), recipe,
// precision (uniform BF16/FP8/FP4/FP32 or a plan file or a stored plan), steps, seed, batch and
// learning rate; start, pause/resume and stop (stop saves a checkpoint); a progress bar with ETA
// and tokens/s; and the table of every run in the database (double-click to monitor one).
#pragma once
#include <QWidget>
#include <optional>

#include "training_worker.h"

class QComboBox;
class QDoubleSpinBox;
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

  QComboBox* preset_combo() const { return preset_combo_; }
  QComboBox* precision_combo() const { return precision_combo_; }
  QSpinBox* steps_spin() const { return steps_spin_; }
  QSpinBox* batch_spin() const { return batch_spin_; }
  QSpinBox* seq_spin() const { return seq_spin_; }
  QLineEdit* config_edit() const { return config_edit_; }
  QLineEdit* data_edit() const { return data_edit_; }
  QLineEdit* plan_edit() const { return plan_edit_; }
  QPushButton* start_button() const { return start_button_; }
  QDoubleSpinBox* adaptive_budget() const { return adaptive_budget_; }
  QSpinBox* adaptive_replan() const { return adaptive_replan_; }
  QSpinBox* adaptive_probe() const { return adaptive_probe_; }
  QPushButton* pause_button() const { return pause_button_; }
  QPushButton* stop_button() const { return stop_button_; }
  QProgressBar* progress_bar() const { return progress_; }
  QTableWidget* runs_table() const { return runs_table_; }

  void set_training(bool training, bool paused = false);
  void show_progress(const StepUpdate& u);

 signals:
  void start_requested();
  void pause_toggled();
  void stop_requested();
  void monitor_requested(qint64 run_id);

 public slots:
  void refresh_runs();

 private:
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
  QDoubleSpinBox* lr_spin_ = nullptr;
  QSpinBox* eval_spin_ = nullptr;
  QSpinBox* save_spin_ = nullptr;
  QLineEdit* name_edit_ = nullptr;
  QWidget* adaptive_box_ = nullptr;
  QDoubleSpinBox* adaptive_budget_ = nullptr;
  QSpinBox* adaptive_replan_ = nullptr;
  QSpinBox* adaptive_probe_ = nullptr;
  QDoubleSpinBox* adaptive_lambda_ = nullptr;
  QPushButton* start_button_ = nullptr;
  QPushButton* pause_button_ = nullptr;
  QPushButton* stop_button_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* progress_label_ = nullptr;
  QTableWidget* runs_table_ = nullptr;
};

}  // namespace snip::ui
